"""The runtime's Store on SQLAlchemy Core: SQLite (one host) and PostgreSQL (many workers)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    column,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy import exc as sa_exc

from agent_runtime.exceptions import (
    AttemptConflict,
    InvalidRunState,
    JournalConflict,
    LeaseLost,
    RunNotFound,
)
from agent_runtime.ids import RunId
from agent_runtime.notices import Notice
from agent_runtime.records import (
    AttemptRecord,
    ErrorInfo,
    Event,
    Fork,
    Lease,
    Run,
    RunStatus,
    StepKind,
    StepRecord,
    Wait,
)
from store.connections import writing
from store.driver import DriverConnections, Prepared
from store.engine import reader
from store.errors import is_unique_violation, translated
from store.json_filters import text_is
from store.models import attempts, events, runs, steps
from store.notify import notify_wake
from store.outbox import write_notices
from store.pages import after as page_after
from store.pages import newest_first
from store.wake import deliver

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


class SqlStore:
    """Implements ``agent_runtime.Store`` over one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._postgres = engine.dialect.name == "postgresql"
        self._driver = DriverConnections(engine)
        self._append = fenced_append_statement(self._postgres)
        self._end = _end_statement()
        self._claim_statement = _claim_statement(self._postgres)
        self._claim = Prepared(self._claim_statement, engine.dialect, _claimed_columns())
        self._fast_append = Prepared(self._append, engine.dialect)
        self._fast_end = Prepared(self._end, engine.dialect)
        self._journal = Prepared(JOURNAL_QUERY, engine.dialect, (steps.c[n] for n in ENTRY))
        self._autocommit = (
            engine.execution_options(isolation_level="AUTOCOMMIT") if self._postgres else None
        )
        self._reader = reader(engine)

    def _tx(self) -> AbstractContextManager[Connection]:
        """A transaction for several statements."""
        return writing(self.engine)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A connection for reading: autocommit on PostgreSQL, a deferred BEGIN on SQLite."""
        with translated(), (self._autocommit or self._reader).connect() as conn:
            yield conn

    @contextmanager
    def _one(self) -> Iterator[Connection]:
        """A connection for a single statement, which is a transaction of its own.

        On PostgreSQL it runs in autocommit mode: no BEGIN and COMMIT round trips. On
        SQLite it is an ordinary (immediate) transaction: in-process, BEGIN and COMMIT cost little.
        """
        if self._autocommit is None:
            with self._tx() as conn:
                yield conn
        else:
            with translated(), self._autocommit.connect() as conn:
                yield conn

    def create_run(
        self,
        run_id: RunId,
        workflow: str,
        input: Any,
        now: datetime,
        notices: Sequence[Notice] = (),
        fork: Fork | None = None,
    ) -> Run:
        """Store a new pending run (with a fork's inherited journal) and its notices, and
        wake the workers."""
        values = {
            "id": run_id,
            "workflow": workflow,
            "status": RunStatus.PENDING.value,
            "input": input,
            "created_at": now,
            "updated_at": now,
            "due_at": now,
            "fence": 0,
            "forked_from": None if fork is None else fork.source,
            "fork_at": None if fork is None else fork.at,
        }
        with self._tx() as conn:
            if fork is not None:
                self._get(conn, fork.source)
            row = conn.execute(insert(runs).values(values).returning(*runs.c)).one()
            if fork is not None and fork.steps:
                conn.execute(insert(steps), [_step_row(run_id, s) for s in fork.steps])
            write_notices(conn, notices, now)
            notify_wake(conn)
        return _run(row)

    def get_run(self, run_id: RunId) -> Run:
        """Return the run or raise RunNotFound."""
        with self._read() as conn:
            return self._get(conn, run_id)

    def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        limit: int = 100,
        forked_from: RunId | None = None,
        input_fields: Mapping[str, str] | None = None,
        after: RunId | None = None,
    ) -> list[Run]:
        """Return the newest runs first, a page after the run ``after``."""
        query = newest_first(select(runs), RUN_ORDER).limit(limit)
        for path, value in (input_fields or {}).items():
            query = query.where(text_is(runs.c.input, path, value, self.engine.dialect.name))
        if status is not None:
            query = query.where(runs.c.status == status.value)
        if forked_from is not None:
            query = query.where(runs.c.forked_from == forked_from)
        with self._read() as conn:
            if after is not None:
                start = self._get(conn, after)
                query = query.where(page_after(RUN_ORDER, (start.created_at, start.id)))
            return [_run(row) for row in conn.execute(query)]

    def claim_runs(
        self, owner: str, *, limit: int, now: datetime, expires_at: datetime
    ) -> list[tuple[Run, Lease]]:
        """Lease up to ``limit`` due runs; SKIP LOCKED keeps concurrent claimers apart."""
        params = {"owner": owner, "now": now, "limit": limit, "expires_at": expires_at}
        if not self._postgres:
            return self._claim_on_sqlite(owner, params, now)
        with translated():
            rows = self._driver.execute(self._claim, params, fetch=True).rows
        return [
            (_run(row), Lease(RunId(row.id), owner, row.fence, taken_over=_took(row, None)))
            for row in rows
        ]

    def _claim_on_sqlite(
        self, owner: str, params: dict[str, Any], now: datetime
    ) -> list[tuple[Run, Lease]]:
        """SQLite's RETURNING sees only the new row: read the lapsed leases first, in the same
        (immediate, so single-writer) transaction."""
        with self._tx() as conn:
            lapsed = _lapsed(conn, now)
            rows = conn.execute(self._claim_statement, params).all()
        return [
            (_run(row), Lease(RunId(row.id), owner, row.fence, taken_over=_took(row, lapsed)))
            for row in rows
        ]

    def adopt_run(
        self, run_id: RunId, owner: str, *, now: datetime, expires_at: datetime
    ) -> Lease | None:
        """Lease this one unfinished run to ``owner`` unless another holds a live lease on it.

        Pending and waiting runs are taken whether due or not (their owner process asks for
        them by id); a running one only once its lease has expired. The fence increases.
        """
        free = or_(runs.c.status != RUNNING, runs.c.due_at <= now)
        stmt = (
            update(runs)
            .where(runs.c.id == run_id, runs.c.status.in_(UNFINISHED), free)
            .values(
                status=RUNNING,
                lease_owner=owner,
                fence=runs.c.fence + 1,
                due_at=expires_at,
                wait_key=None,
                updated_at=now,
            )
            .returning(runs.c.fence)
        )
        with self._one() as conn:
            fence = conn.execute(stmt).scalar()
        return None if fence is None else Lease(run_id, owner, int(fence))

    def renew_lease(self, lease: Lease, expires_at: datetime) -> bool:
        """Extend a held lease."""
        with self._one() as conn:
            result = conn.execute(update(runs).where(_held(lease)).values(due_at=expires_at))
        return bool(result.rowcount)

    def renew_leases(self, leases: Sequence[Lease], expires_at: datetime) -> list[Lease]:
        """Extend held leases in one UPDATE; return those lost."""
        if not leases:
            return []
        held = tuple_(runs.c.id, runs.c.fence).in_([(held.run_id, held.fence) for held in leases])
        stmt = (
            update(runs)
            .where(held, runs.c.status == RUNNING)
            .values(due_at=expires_at)
            .returning(runs.c.id, runs.c.fence)
        )
        with self._one() as conn:
            renewed = {(row.id, row.fence) for row in conn.execute(stmt)}
        return [lease for lease in leases if (lease.run_id, lease.fence) not in renewed]

    def load_journal(self, run_id: RunId) -> list[StepRecord]:
        """Return the journal in position order (one statement: a consistent snapshot)."""
        with translated():
            rows = self._driver.execute(self._journal, {"run_id": run_id}, fetch=True).rows
        return [_step(row) for row in rows]

    def append_step(self, lease: Lease, step: StepRecord, notices: Sequence[Notice] = ()) -> None:
        """Append one entry in a single statement that checks the fence.

        Without notices the statement is its own transaction (the fast path); with them,
        the notices are queued in the same transaction.
        """
        params = fenced_append_params(lease, step)
        try:
            if notices:
                written = self._in_transaction(self._append, params, notices, step.finished_at)
            else:
                with translated():
                    written = self._driver.execute(self._fast_append, params).rowcount
        except sa_exc.IntegrityError as exc:
            if is_unique_violation(exc):
                raise JournalConflict(lease.run_id, step.position) from exc
            raise
        if not written:
            raise LeaseLost(lease.run_id, lease.fence)

    def _in_transaction(
        self, statement: Any, params: dict[str, Any], notices: Sequence[Notice], now: datetime
    ) -> int:
        """Run a fenced statement and, if it changed a row, queue ``notices``, in one
        transaction; return the rows changed."""
        with self._tx() as conn:
            written = int(conn.execute(statement, params).rowcount)
            if written:
                write_notices(conn, notices, now)
        return written

    def record_attempt(self, lease: Lease, attempt: AttemptRecord) -> None:
        """Record a failed attempt in one statement that checks the fence (as an append does)."""
        try:
            with self._one() as conn:
                statement = self._fenced_attempt(lease, attempt)
                written = conn.execution_options(preserve_rowcount=True).execute(statement).rowcount
        except sa_exc.IntegrityError as exc:
            if is_unique_violation(exc):
                raise AttemptConflict(lease.run_id, attempt.position, attempt.attempt) from exc
            raise
        if not written:
            raise LeaseLost(lease.run_id, lease.fence)

    def _fenced_attempt(self, lease: Lease, attempt: AttemptRecord) -> Any:
        entry = select(
            runs.c.id,
            literal(attempt.position),
            literal(attempt.attempt),
            literal(attempt.error.to_json(), attempts.c.error.type),
            literal(attempt.at, attempts.c.at.type),
        ).where(_held(lease))
        if self._postgres:
            entry = entry.with_for_update(read=True)
        return insert(attempts).from_select(["run_id", "position", "attempt", "error", "at"], entry)

    def list_attempts(self, run_id: RunId) -> list[AttemptRecord]:
        """Return the failed attempts, oldest first."""
        query = (
            select(attempts)
            .where(attempts.c.run_id == run_id)
            .order_by(attempts.c.position, attempts.c.attempt)
        )
        with self._read() as conn:
            return [
                AttemptRecord(
                    position=r.position,
                    attempt=r.attempt,
                    error=ErrorInfo.from_json(r.error),
                    at=r.at,
                )
                for r in conn.execute(query)
            ]

    def suspend(self, lease: Lease, wait: Wait, now: datetime) -> RunStatus:
        """Park the run; if its event has arrived meanwhile, make it pending at once."""
        with self._tx() as conn:
            self._update_held(
                conn,
                lease,
                status=RunStatus.WAITING.value,
                lease_owner=None,
                due_at=wait.wake_at,
                wait_key=wait.key,
                updated_at=now,
            )
            if wait.key is None or not self._has_event(conn, lease.run_id, wait.key):
                return RunStatus.WAITING
            conn.execute(
                update(runs)
                .where(runs.c.id == lease.run_id)
                .values(status=RunStatus.PENDING.value, due_at=now, wait_key=None)
            )
            return RunStatus.PENDING

    def release(self, lease: Lease, now: datetime) -> None:
        """Give the run back so that any worker resumes it at once."""
        with self._one() as conn:
            self._update_held(
                conn,
                lease,
                status=RunStatus.PENDING.value,
                lease_owner=None,
                due_at=now,
                updated_at=now,
            )

    def complete(
        self, lease: Lease, output: Any, now: datetime, notices: Sequence[Notice] = ()
    ) -> None:
        """End the run successfully (and queue its notices)."""
        self._finish(lease, RunStatus.COMPLETED, now, notices, output=output)

    def fail(
        self, lease: Lease, error: ErrorInfo, now: datetime, notices: Sequence[Notice] = ()
    ) -> None:
        """End the run as failed (and queue its notices)."""
        self._finish(lease, RunStatus.FAILED, now, notices, error=error.to_json())

    def _finish(
        self,
        lease: Lease,
        status: RunStatus,
        now: datetime,
        notices: Sequence[Notice],
        output: Any = None,
        error: Any = None,
    ) -> None:
        params = {
            **_held_params(lease),
            "end_status": status.value,
            "end_output": output,
            "end_error": error,
            "end_at": now,
        }
        if notices:
            written = self._in_transaction(self._end, params, notices, now)
        else:
            with translated():
                written = self._driver.execute(self._fast_end, params).rowcount
        if not written:
            raise LeaseLost(lease.run_id, lease.fence)

    def cancel(self, run_id: RunId, now: datetime, notices: Sequence[Notice] = ()) -> Run:
        """Cancel an unfinished run; bumping the fence locks its worker out."""
        with self._tx() as conn:
            return cancel_in(conn, run_id, now, notices)

    def resume(self, run_id: RunId, now: datetime) -> Run:
        """Make a failed run pending again."""
        stmt = (
            update(runs)
            .where(runs.c.id == run_id, runs.c.status == RunStatus.FAILED.value)
            .values(status=RunStatus.PENDING.value, error=None, due_at=now, updated_at=now)
            .returning(*runs.c)
        )
        return self._transition(stmt, run_id, "resume")

    def deliver_event(self, run_id: RunId, key: str, data: Any, now: datetime) -> Run:
        """Store the event and wake the run if it waits for ``key``."""
        with self._tx() as conn:
            deliver(conn, run_id, key, data, now)
            notify_wake(conn)
            return self._get(conn, run_id)

    def get_event(self, run_id: RunId, key: str) -> Event | None:
        """Return the event delivered under ``key``."""
        query = select(events).where(events.c.run_id == run_id, events.c.key == key)
        with self._read() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return Event(key=row.key, data=row.data, delivered_at=row.delivered_at)

    def next_due(self) -> datetime | None:
        """Return the earliest due time of any unfinished run."""
        with self._read() as conn:
            value: datetime | None = conn.execute(select(func.min(runs.c.due_at))).scalar()
        return value

    def _get(self, conn: Connection, run_id: RunId) -> Run:
        return load_run(conn, run_id)

    def _transition(
        self,
        stmt: Any,
        run_id: RunId,
        operation: str,
        notices: Sequence[Notice] = (),
        now: datetime | None = None,
    ) -> Run:
        with self._tx() as conn:
            row = conn.execute(stmt).first()
            if row is None:
                raise InvalidRunState(run_id, self._get(conn, run_id).status, operation)
            if notices and now is not None:
                write_notices(conn, notices, now)
            notify_wake(conn)
        return _run(row)

    def _check_lease(self, conn: Connection, lease: Lease) -> None:
        if conn.execute(select(runs.c.id).where(_held(lease))).first() is None:
            raise LeaseLost(lease.run_id, lease.fence)

    def _update_held(self, conn: Connection, lease: Lease, **values: Any) -> None:
        if not conn.execute(update(runs).where(_held(lease)).values(**values)).rowcount:
            raise LeaseLost(lease.run_id, lease.fence)

    def _has_event(self, conn: Connection, run_id: RunId, key: str) -> bool:
        query = select(exists().where(events.c.run_id == run_id, events.c.key == key))
        return bool(conn.execute(query).scalar())


def _held(lease: Lease) -> Any:
    return and_(runs.c.id == lease.run_id, runs.c.fence == lease.fence, runs.c.status == RUNNING)


def fenced_append_statement(postgres: bool) -> Any:
    """``INSERT INTO steps SELECT <entry> FROM runs WHERE id = :run_id AND fence = :fence AND
    status = 'running'``: the entry is written only if the lease is still held, checked in
    the same statement. On PostgreSQL the run row is share-locked (``FOR SHARE``), so a
    concurrent claim or cancel (which bumps the fence) either waits for this insert or
    makes it insert nothing."""
    values = (bindparam(f"entry_{name}", type_=steps.c[name].type) for name in ENTRY)
    source = select(runs.c.id, *values).where(_held_by_params())
    if postgres:
        source = source.with_for_update(read=True)
    names = ["run_id", *ENTRY]
    return insert(steps).from_select(names, source).execution_options(preserve_rowcount=True)


def fenced_append_params(lease: Lease, step: StepRecord) -> dict[str, Any]:
    """The parameters of ``fenced_append_statement`` that append ``step`` under ``lease``."""
    row = _step_row(lease.run_id, step)
    entry = {f"entry_{name}": row[name] for name in ENTRY}
    return {**entry, **_held_params(lease)}


def _end_statement() -> Any:
    """End a run held under ``:held_run`` and ``:held_fence`` with ``:end_status``,
    ``:end_output`` and ``:end_error``, at ``:end_at``.

    No bind is named after a column: SQLAlchemy would take it for a value to SET."""
    return (
        update(runs)
        .where(_held_by_params())
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


def _held_by_params() -> Any:
    """The run held under the lease given as ``:held_run`` and ``:held_fence``."""
    return and_(
        runs.c.id == bindparam("held_run"),
        runs.c.fence == bindparam("held_fence"),
        runs.c.status == RUNNING,
    )


def _held_params(lease: Lease) -> dict[str, Any]:
    return {"held_run": lease.run_id, "held_fence": lease.fence}


def _lapsed(conn: Connection, now: datetime) -> set[str]:
    """The ids of the runs still running whose lease lapsed by ``now``."""
    query = select(runs.c.id).where(runs.c.status == RUNNING, runs.c.due_at <= now)
    return set(conn.execute(query).scalars())


def _took(row: Any, lapsed: set[str] | None) -> bool:
    """Whether the claimed ``row`` was taken over from a lapsed lease."""
    return row.id in lapsed if lapsed is not None else bool(row.was == RUNNING)


def _claimed_columns() -> list[Any]:
    """The columns the PostgreSQL claim returns: the run's, and the status it had (``was``)."""
    return [*runs.c, column("was", runs.c.status.type)]


RUN_ORDER = (runs.c.created_at, runs.c.id)
"""The order of lists of runs (newest first), which their indexes hold."""


def _claim_statement(postgres: bool) -> Any:
    """UPDATE runs SET <leased to :owner until :expires_at, fence + 1> for up to :limit runs
    due at :now, RETURNING the runs (on PostgreSQL also the status each had, ``was``); built
    once (it is costly to build)."""
    now = bindparam("now", type_=runs.c.due_at.type)
    due = (
        select(runs.c.id, runs.c.status.label("was"))
        .where(runs.c.due_at <= now)
        .order_by(runs.c.due_at)
        .limit(bindparam("limit"))
    )
    if not postgres:
        return _leased(update(runs).where(runs.c.id.in_(due.with_only_columns(runs.c.id))), now)
    claimed = due.with_for_update(skip_locked=True).subquery("due")
    statement = _leased(update(runs).where(runs.c.id == claimed.c.id), now)
    return statement.returning(claimed.c.was)


def _leased(statement: Any, now: Any) -> Any:
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
    row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
    if row is None:
        raise RunNotFound(run_id)
    return _run(row)


def cancel_in(conn: Connection, run_id: RunId, now: datetime, notices: Sequence[Notice]) -> Run:
    """Cancel an unfinished run in ``conn``'s transaction; bumping the fence locks its worker
    out. ``InvalidRunState`` for a finished run."""
    stmt = (
        update(runs)
        .where(runs.c.id == run_id, runs.c.status.in_(UNFINISHED))
        .values(status=RunStatus.CANCELLED.value, fence=runs.c.fence + 1, **_ended(now))
        .returning(*runs.c)
    )
    row = conn.execute(stmt).first()
    if row is None:
        raise InvalidRunState(run_id, load_run(conn, run_id).status, "cancel")
    write_notices(conn, notices, now)
    notify_wake(conn)
    return _run(row)


def _ended(now: datetime) -> dict[str, Any]:
    return {"lease_owner": None, "due_at": None, "wait_key": None, "updated_at": now}


def _run(row: Any) -> Run:
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


def _step_row(run_id: RunId, step: StepRecord) -> dict[str, Any]:
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


def _step(row: Any) -> StepRecord:
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
