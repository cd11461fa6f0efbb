"""The runtime's Store on SQLAlchemy Core: SQLite (one host) and PostgreSQL (many workers)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    and_,
    bindparam,
    cast,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlalchemy import exc as sa_exc

from agent_runtime.exceptions import (
    EventAlreadyDelivered,
    InvalidRunState,
    JournalConflict,
    LeaseLost,
    RunNotFound,
)
from agent_runtime.ids import RunId
from agent_runtime.records import (
    AttemptRecord,
    ErrorInfo,
    Event,
    Lease,
    Run,
    RunStatus,
    StepKind,
    StepRecord,
    Wait,
)
from store.errors import is_unique_violation, translated
from store.models import attempts, events, runs, steps

RUNNING = RunStatus.RUNNING.value
UNFINISHED = (RunStatus.PENDING.value, RunStatus.RUNNING.value, RunStatus.WAITING.value)
STEP_COLUMNS = [c.name for c in steps.columns]


class SqlStore:
    """Implements ``agent_runtime.Store`` over one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._postgres = engine.dialect.name == "postgresql"
        self._append = _fenced_insert(self._postgres)
        self._claim_ids = _claimable_ids(self._postgres)

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with translated(), self.engine.begin() as conn:
            yield conn

    def create_run(self, run_id: RunId, workflow: str, input: Any, now: datetime) -> Run:
        """Store a new pending run."""
        values = {"id": run_id, "workflow": workflow, "status": RunStatus.PENDING.value,
                  "input": input, "created_at": now, "updated_at": now, "due_at": now, "fence": 0}
        with self._tx() as conn:
            row = conn.execute(insert(runs).values(values).returning(*runs.c)).one()
        return _run(row)

    def get_run(self, run_id: RunId) -> Run:
        """Return the run or raise RunNotFound."""
        with self._tx() as conn:
            return self._get(conn, run_id)

    def list_runs(self, *, status: RunStatus | None = None, limit: int = 100) -> list[Run]:
        """Return the newest runs first."""
        query = select(runs).order_by(runs.c.created_at.desc()).limit(limit)
        if status is not None:
            query = query.where(runs.c.status == status.value)
        with self._tx() as conn:
            return [_run(row) for row in conn.execute(query)]

    def claim_runs(
        self, owner: str, *, limit: int, now: datetime, expires_at: datetime
    ) -> list[tuple[Run, Lease]]:
        """Lease up to ``limit`` due runs; SKIP LOCKED keeps concurrent claimers apart."""
        stmt = (
            update(runs)
            .where(runs.c.id.in_(self._claim_ids))
            .values(status=RUNNING, lease_owner=owner, fence=runs.c.fence + 1,
                    due_at=expires_at, updated_at=now)
            .returning(*runs.c)
        )
        with self._tx() as conn:
            rows = conn.execute(stmt, {"now": now, "limit": limit}).all()
        return [(_run(row), Lease(RunId(row.id), owner, row.fence)) for row in rows]

    def renew_lease(self, lease: Lease, expires_at: datetime) -> bool:
        """Extend a held lease."""
        with self._tx() as conn:
            result = conn.execute(
                update(runs).where(_held(lease)).values(due_at=expires_at)
            )
        return bool(result.rowcount)

    def load_journal(self, run_id: RunId) -> list[StepRecord]:
        """Return the journal in position order."""
        query = select(steps).where(steps.c.run_id == run_id).order_by(steps.c.position)
        with self._tx() as conn:
            return [_step(row) for row in conn.execute(query)]

    def append_step(self, lease: Lease, step: StepRecord) -> None:
        """Append one entry in a single statement that also checks the fence."""
        params = {
            "run_id": lease.run_id, "fence": lease.fence, "status": RUNNING,
            "position": step.position, "kind": step.kind.value, "name": step.name,
            "input_hash": step.input_hash, "output": step.output,
            "error": None if step.error is None else step.error.to_json(),
            "attempts": step.attempts, "started_at": step.started_at,
            "finished_at": step.finished_at,
        }
        try:
            with self._tx() as conn:
                written = conn.execute(self._append, params).rowcount
        except sa_exc.IntegrityError as exc:
            if is_unique_violation(exc):
                raise JournalConflict(lease.run_id, step.position) from exc
            raise
        if not written:
            raise LeaseLost(lease.run_id, lease.fence)

    def record_attempt(self, lease: Lease, attempt: AttemptRecord) -> None:
        """Record a failed attempt under the lease."""
        with self._tx() as conn:
            self._check_lease(conn, lease)
            conn.execute(insert(attempts).values(
                run_id=lease.run_id, position=attempt.position, attempt=attempt.attempt,
                error=attempt.error.to_json(), at=attempt.at))

    def list_attempts(self, run_id: RunId) -> list[AttemptRecord]:
        """Return the failed attempts, oldest first."""
        query = (select(attempts).where(attempts.c.run_id == run_id)
                 .order_by(attempts.c.position, attempts.c.attempt))
        with self._tx() as conn:
            return [
                AttemptRecord(position=r.position, attempt=r.attempt,
                              error=ErrorInfo.from_json(r.error), at=r.at)
                for r in conn.execute(query)
            ]

    def suspend(self, lease: Lease, wait: Wait, now: datetime) -> RunStatus:
        """Park the run; if its event has arrived meanwhile, make it pending at once."""
        with self._tx() as conn:
            self._update_held(conn, lease, status=RunStatus.WAITING.value, lease_owner=None,
                              due_at=wait.wake_at, wait_key=wait.key, updated_at=now)
            if wait.key is None or not self._has_event(conn, lease.run_id, wait.key):
                return RunStatus.WAITING
            conn.execute(update(runs).where(runs.c.id == lease.run_id).values(
                status=RunStatus.PENDING.value, due_at=now, wait_key=None))
            return RunStatus.PENDING

    def release(self, lease: Lease, now: datetime) -> None:
        """Give the run back so that any worker resumes it at once."""
        with self._tx() as conn:
            self._update_held(conn, lease, status=RunStatus.PENDING.value, lease_owner=None,
                              due_at=now, updated_at=now)

    def complete(self, lease: Lease, output: Any, now: datetime) -> None:
        """End the run successfully."""
        with self._tx() as conn:
            self._update_held(conn, lease, status=RunStatus.COMPLETED.value, output=output,
                              **_ended(now))

    def fail(self, lease: Lease, error: ErrorInfo, now: datetime) -> None:
        """End the run as failed."""
        with self._tx() as conn:
            self._update_held(conn, lease, status=RunStatus.FAILED.value,
                              error=error.to_json(), **_ended(now))

    def cancel(self, run_id: RunId, now: datetime) -> Run:
        """Cancel an unfinished run; bumping the fence locks its worker out."""
        stmt = (update(runs)
                .where(runs.c.id == run_id, runs.c.status.in_(UNFINISHED))
                .values(status=RunStatus.CANCELLED.value, fence=runs.c.fence + 1, **_ended(now))
                .returning(*runs.c))
        return self._transition(stmt, run_id, "cancel")

    def resume(self, run_id: RunId, now: datetime) -> Run:
        """Make a failed run pending again."""
        stmt = (update(runs)
                .where(runs.c.id == run_id, runs.c.status == RunStatus.FAILED.value)
                .values(status=RunStatus.PENDING.value, error=None, due_at=now, updated_at=now)
                .returning(*runs.c))
        return self._transition(stmt, run_id, "resume")

    def deliver_event(self, run_id: RunId, key: str, data: Any, now: datetime) -> Run:
        """Store the event and wake the run if it waits for ``key``."""
        try:
            with self._tx() as conn:
                run = self._get(conn, run_id)
                if run.status.finished:
                    raise InvalidRunState(run_id, run.status, "signal")
                conn.execute(insert(events).values(
                    run_id=run_id, key=key, data=data, delivered_at=now))
                conn.execute(
                    update(runs)
                    .where(runs.c.id == run_id, runs.c.status == RunStatus.WAITING.value,
                           runs.c.wait_key == key)
                    .values(status=RunStatus.PENDING.value, due_at=now, wait_key=None,
                            updated_at=now))
                return self._get(conn, run_id)
        except sa_exc.IntegrityError as exc:
            if is_unique_violation(exc):
                raise EventAlreadyDelivered(run_id, key) from exc
            raise

    def get_event(self, run_id: RunId, key: str) -> Event | None:
        """Return the event delivered under ``key``."""
        query = select(events).where(events.c.run_id == run_id, events.c.key == key)
        with self._tx() as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return Event(key=row.key, data=row.data, delivered_at=row.delivered_at)

    def runnable_count(self, now: datetime) -> int:
        """Count the runs due at ``now``."""
        with self._tx() as conn:
            return int(conn.execute(
                select(func.count()).select_from(runs).where(runs.c.due_at <= now)).scalar_one())

    def next_due(self) -> datetime | None:
        """Return the earliest due time of any unfinished run."""
        with self._tx() as conn:
            value: datetime | None = conn.execute(select(func.min(runs.c.due_at))).scalar()
        return value

    def _get(self, conn: Connection, run_id: RunId) -> Run:
        row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
        if row is None:
            raise RunNotFound(run_id)
        return _run(row)

    def _transition(self, stmt: Any, run_id: RunId, operation: str) -> Run:
        with self._tx() as conn:
            row = conn.execute(stmt).first()
            if row is None:
                raise InvalidRunState(run_id, self._get(conn, run_id).status, operation)
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


def _fenced_insert(postgres: bool) -> Any:
    """INSERT INTO steps SELECT <params> FROM runs WHERE the lease is still held.

    On PostgreSQL the run row is share-locked, so a concurrent claim or cancel (which
    bumps the fence) either waits for this insert or makes it insert nothing.
    """
    values = [bindparam(c.name, type_=c.type) for c in steps.columns]
    if postgres:  # parameters in a SELECT list need their type spelled out for the server
        values = [cast(value, value.type) for value in values]
    guard = select(*values).where(
        runs.c.id == bindparam("run_id"),
        runs.c.fence == bindparam("fence"),
        runs.c.status == bindparam("status"),
    )
    if postgres:
        guard = guard.with_for_update(read=True)
    # rowcount of an INSERT is only kept on request; it tells whether the fence matched
    return insert(steps).from_select(STEP_COLUMNS, guard).execution_options(preserve_rowcount=True)


def _claimable_ids(postgres: bool) -> Any:
    query = (select(runs.c.id).where(runs.c.due_at <= bindparam("now", type_=runs.c.due_at.type))
             .order_by(runs.c.due_at).limit(bindparam("limit")))
    if postgres:
        query = query.with_for_update(skip_locked=True)
    return query.scalar_subquery()


def _ended(now: datetime) -> dict[str, Any]:
    return {"lease_owner": None, "due_at": None, "wait_key": None, "updated_at": now}


def _run(row: Row[Any]) -> Run:
    return Run(
        id=RunId(row.id), workflow=row.workflow, status=RunStatus(row.status), input=row.input,
        output=row.output, error=None if row.error is None else ErrorInfo.from_json(row.error),
        created_at=row.created_at, updated_at=row.updated_at, due_at=row.due_at,
        wait_key=row.wait_key, lease_owner=row.lease_owner, fence=row.fence,
    )


def _step(row: Row[Any]) -> StepRecord:
    return StepRecord(
        position=row.position, kind=StepKind(row.kind), name=row.name,
        input_hash=row.input_hash, output=row.output,
        error=None if row.error is None else ErrorInfo.from_json(row.error),
        attempts=row.attempts, started_at=row.started_at, finished_at=row.finished_at,
    )
