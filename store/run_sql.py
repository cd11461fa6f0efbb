"""The SQL of runs and their journals: statements built once, and rows read into records.

``SqlStore`` runs these; the benchmarks' raw baselines use the same statements, so both
measure one protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Integer, and_, bindparam, column, insert, select, update

from agent_runtime.exceptions import InvalidRunState, RunNotFound
from agent_runtime.ids import RunId
from agent_runtime.notices import Notice
from agent_runtime.records import ErrorInfo, Lease, Run, RunStatus, StepKind, StepRecord
from store.models import events, runs, steps
from store.notify import notify_wake
from store.outbox import write_notices
from store.row_checks import row_has, row_has_one_of

RUNNING = RunStatus.RUNNING.value
UNFINISHED = (RunStatus.PENDING.value, RunStatus.RUNNING.value, RunStatus.WAITING.value)
ENTRY = tuple(column.name for column in steps.columns if column.name != "run_id")
"""The columns of a journal entry that its step gives (the run's id comes from the run)."""
JOURNAL_QUERY = (
    select(*(steps.c[name] for name in ENTRY))
    .where(steps.c.run_id == bindparam("run_id"))
    .order_by(steps.c.position)
)
"""A run's journal: its entries' own columns (the run's id is known), in position order."""
EVENT = (events.c.key, events.c.data, events.c.delivered_at)
EVENT_QUERY = select(*EVENT).where(
    events.c.run_id == bindparam("run_id"), events.c.key == bindparam("event_key")
)
"""The event a run was delivered under a key (read as a run resumes on it)."""
RUN_QUERY = select(runs).where(runs.c.id == bindparam("run_id"))
"""A run by its id (read for every notice its root message shows, among others)."""


def held_by(lease: Lease) -> Any:
    return and_(
        runs.c.id == lease.run_id, runs.c.fence == lease.fence, row_has(runs.c.status, RUNNING)
    )


def fenced_append_statement(postgres: bool) -> Any:
    """``INSERT INTO steps SELECT <entry> FROM runs WHERE id = :run_id AND fence = :fence AND
    status = 'running'``: the entry is written only if the lease is still held, checked in
    the same statement. On PostgreSQL the run row is share-locked (``FOR SHARE``), so a
    concurrent claim or cancel (which bumps the fence) either waits for this insert or
    makes it insert nothing."""
    values = (bindparam(f"entry_{name}", type_=steps.c[name].type) for name in ENTRY)
    source = select(runs.c.id, *values).where(held_by_params())
    if postgres:
        source = source.with_for_update(read=True)
    names = ["run_id", *ENTRY]
    return insert(steps).from_select(names, source).execution_options(preserve_rowcount=True)


def fenced_append_params(lease: Lease, step: StepRecord) -> dict[str, Any]:
    """The parameters of ``fenced_append_statement`` that append ``step`` under ``lease``."""
    return {  # spelled out, not built from ``step_row``: it is made for every entry
        "entry_position": step.position,
        "entry_kind": step.kind.value,
        "entry_name": step.name,
        "entry_input_hash": step.input_hash,
        "entry_output": step.output,
        "entry_error": None if step.error is None else step.error.to_json(),
        "entry_attempts": step.attempts,
        "entry_started_at": step.started_at,
        "entry_finished_at": step.finished_at,
        "held_run": lease.run_id,
        "held_fence": lease.fence,
    }


def end_statement() -> Any:
    """End a run held under ``:held_run`` and ``:held_fence`` with ``:end_status``,
    ``:end_output`` and ``:end_error``, at ``:end_at``.

    No bind is named after a column: SQLAlchemy would take it for a value to SET."""
    return (
        update(runs)
        .where(held_by_params())
        .values(
            status=bindparam("end_status"),
            output=bindparam("end_output", type_=runs.c.output.type),
            error=bindparam("end_error", type_=runs.c.error.type),
            lease_owner=None,
            due_at=None,
            wait_key=None,
            updated_at=bindparam("end_at", type_=runs.c.updated_at.type),
        )
    )


def held_by_params() -> Any:
    """The run held under the lease given as ``:held_run`` and ``:held_fence``."""
    return and_(
        runs.c.id == bindparam("held_run"),
        runs.c.fence == bindparam("held_fence"),
        row_has(runs.c.status, RUNNING),
    )


def held_params(lease: Lease) -> dict[str, Any]:
    return {"held_run": lease.run_id, "held_fence": lease.fence}


def lapsed_leases(conn: Connection, now: datetime) -> set[str]:
    """The ids of the runs still running whose lease lapsed by ``now``."""
    query = select(runs.c.id).where(runs.c.status == RUNNING, runs.c.due_at <= now)
    return set(conn.execute(query).scalars())


def taken_over(row: Any, lapsed: set[str] | None) -> bool:
    """Whether the claimed ``row`` was taken over from a lapsed lease."""
    return row.id in lapsed if lapsed is not None else bool(row.was == RUNNING)


def claimed_columns() -> list[Any]:
    """The columns the PostgreSQL claim returns: the run's, and the status it had (``was``)."""
    return [*runs.c, column("was", runs.c.status.type)]


RUN_ORDER = (runs.c.created_at, runs.c.id)
"""The order of lists of runs (newest first), which their indexes hold."""


def claim_statement(postgres: bool) -> Any:
    """UPDATE runs SET <leased to :owner until :expires_at, fence + 1> for up to :limit runs
    due at :now, RETURNING the runs (on PostgreSQL also the status each had, ``was``); built
    once (it is costly to build)."""
    now = bindparam("now", type_=runs.c.due_at.type)
    due = (
        select(runs.c.id, runs.c.status.label("was"))
        .where(runs.c.due_at <= now)
        .order_by(runs.c.due_at)
        .limit(bindparam("limit", type_=Integer))
    )
    if not postgres:
        return lease_values(
            update(runs).where(runs.c.id.in_(due.with_only_columns(runs.c.id))), now
        )
    claimed = due.with_for_update(skip_locked=True).subquery("due")
    statement = lease_values(update(runs).where(runs.c.id == claimed.c.id), now)
    return statement.returning(claimed.c.was)


def lease_values(statement: Any, now: Any) -> Any:
    """The claim's SET and RETURNING clauses."""
    return statement.values(
        status=RUNNING,
        lease_owner=bindparam("owner"),
        fence=runs.c.fence + 1,
        due_at=bindparam("expires_at", type_=runs.c.due_at.type),
        updated_at=now,
    ).returning(*runs.c)


def load_run(conn: Connection, run_id: RunId) -> Run:
    """Return the run or raise ``RunNotFound``."""
    row = conn.execute(RUN_QUERY, {"run_id": run_id}).first()
    if row is None:
        raise RunNotFound(run_id)
    return run_from_row(row)


def cancel_in(conn: Connection, run_id: RunId, now: datetime, notices: Sequence[Notice]) -> Run:
    """Cancel an unfinished run in ``conn``'s transaction; bumping the fence locks its worker
    out. ``InvalidRunState`` for a finished run."""
    stmt = (
        update(runs)
        .where(runs.c.id == run_id, row_has_one_of(runs.c.status, UNFINISHED))
        .values(status=RunStatus.CANCELLED.value, fence=runs.c.fence + 1, **end_values(now))
        .returning(*runs.c)
    )
    row = conn.execute(stmt).first()
    if row is None:
        raise InvalidRunState(run_id, load_run(conn, run_id).status, "cancel")
    write_notices(conn, notices, now)
    notify_wake(conn)
    return run_from_row(row)


def end_values(now: datetime) -> dict[str, Any]:
    return {"lease_owner": None, "due_at": None, "wait_key": None, "updated_at": now}


def run_from_row(row: Any) -> Run:
    return Run(
        id=RunId(row.id),
        workflow=row.workflow,
        status=RunStatus(row.status),
        input=row.input,
        output=row.output,
        error=None if row.error is None else ErrorInfo.from_json(row.error),
        created_at=row.created_at,
        updated_at=row.updated_at,
        due_at=row.due_at,
        wait_key=row.wait_key,
        lease_owner=row.lease_owner,
        fence=row.fence,
        forked_from=None if row.forked_from is None else RunId(row.forked_from),
        fork_at=row.fork_at,
    )


def step_row(run_id: RunId, step: StepRecord) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "position": step.position,
        "kind": step.kind.value,
        "name": step.name,
        "input_hash": step.input_hash,
        "output": step.output,
        "error": None if step.error is None else step.error.to_json(),
        "attempts": step.attempts,
        "started_at": step.started_at,
        "finished_at": step.finished_at,
    }


def step_from_row(row: Any) -> StepRecord:
    return StepRecord(
        position=row.position,
        kind=StepKind(row.kind),
        name=row.name,
        input_hash=row.input_hash,
        output=row.output,
        error=None if row.error is None else ErrorInfo.from_json(row.error),
        attempts=row.attempts,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )
