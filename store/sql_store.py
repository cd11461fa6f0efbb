"""The runtime's Store on SQLAlchemy Core: SQLite (one host) and PostgreSQL (many workers)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
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

from agent_runtime.built_once import built_once
from agent_runtime.exceptions import (
    AttemptConflict,
    InvalidRunState,
    JournalConflict,
    LeaseLost,
    RunExists,
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
    StepRecord,
    Wait,
)
from store.connections import writing
from store.driver import DriverConnections, Prepared, Statement
from store.engine import reader
from store.errors import is_unique_violation, translated
from store.json_filters import text_is
from store.models import attempts, events, runs, steps
from store.notify import notify_wake
from store.outbox import write_notices
from store.pages import after as page_after
from store.pages import newest_first
from store.plain_statements import libpq_statement, plain_statement
from store.row_checks import row_has, row_has_one_of
from store.run_sql import (
    ENTRY,
    EVENT,
    EVENT_QUERY,
    JOURNAL_QUERY,
    RUN_ORDER,
    RUN_QUERY,
    RUNNING,
    UNFINISHED,
    cancel_in,
    claim_statement,
    claimed_columns,
    end_statement,
    fenced_append_params,
    fenced_append_statement,
    held_by,
    held_params,
    lapsed_leases,
    load_run,
    run_from_row,
    step_from_row,
    step_row,
    taken_over,
)
from store.wake import deliver


class SqlStore:
    """Implements ``agent_runtime.Store`` over one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._postgres = engine.dialect.name == "postgresql"
        self._driver = DriverConnections(engine)
        self._autocommit = (
            engine.execution_options(isolation_level="AUTOCOMMIT") if self._postgres else None
        )
        self._reader = reader(engine)

    # The hot path's statements, each built (and compiled) when first used: a command that
    # lists runs compiles none of the worker's.

    @built_once
    def _append(self) -> Any:
        return fenced_append_statement(self._postgres)

    @built_once
    def _end(self) -> Any:
        return end_statement()

    @built_once
    def _claim_statement(self) -> Any:
        return claim_statement(self._postgres)

    @built_once
    def _claim(self) -> Statement:  # PostgreSQL's: SQLite claims in a transaction
        return libpq_statement(
            self._claim_statement, self.engine.dialect, "signoff_claim", claimed_columns()
        )

    @built_once
    def _fast_append(self) -> Statement:
        return plain_statement(self._append, self.engine.dialect, "signoff_append")

    @built_once
    def _fast_end(self) -> Statement:
        return plain_statement(self._end, self.engine.dialect, "signoff_end")

    @built_once
    def _journal(self) -> Statement:
        entry = [steps.c[name] for name in ENTRY]
        if self._postgres:
            return libpq_statement(JOURNAL_QUERY, self.engine.dialect, "signoff_journal", entry)
        return Prepared(JOURNAL_QUERY, self.engine.dialect, entry)

    @built_once
    def _event(self) -> Prepared:
        return Prepared(EVENT_QUERY, self.engine.dialect, EVENT)

    @built_once
    def _run(self) -> Prepared:
        return Prepared(RUN_QUERY, self.engine.dialect, runs.c)

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
        wake the workers; ``RunExists`` if the id is taken."""
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
        try:
            with self._tx() as conn:
                if fork is not None:
                    self._get(conn, fork.source)
                row = conn.execute(insert(runs).values(values).returning(*runs.c)).one()
                if fork is not None and fork.steps:
                    conn.execute(insert(steps), [step_row(run_id, s) for s in fork.steps])
                write_notices(conn, notices, now)
                notify_wake(conn)
        except sa_exc.IntegrityError as exc:
            if is_unique_violation(exc):
                raise RunExists(run_id) from exc
            raise
        return run_from_row(row)

    def get_run(self, run_id: RunId) -> Run:
        """Return the run or raise RunNotFound (one statement compiled once, on an
        autocommit connection)."""
        with translated():
            rows = self._driver.execute(self._run, {"run_id": run_id}, fetch=True).rows
        if not rows:
            raise RunNotFound(run_id)
        return run_from_row(rows[0])

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
            return [run_from_row(row) for row in conn.execute(query)]

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
            (
                run_from_row(row),
                Lease(RunId(row.id), owner, row.fence, taken_over=taken_over(row, None)),
            )
            for row in rows
        ]

    def _claim_on_sqlite(
        self, owner: str, params: dict[str, Any], now: datetime
    ) -> list[tuple[Run, Lease]]:
        """SQLite's RETURNING sees only the new row: read the lapsed leases first, in the same
        (immediate, so single-writer) transaction."""
        with self._tx() as conn:
            lapsed = lapsed_leases(conn, now)
            rows = conn.execute(self._claim_statement, params).all()
        return [
            (
                run_from_row(row),
                Lease(RunId(row.id), owner, row.fence, taken_over=taken_over(row, lapsed)),
            )
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
            .where(runs.c.id == run_id, row_has_one_of(runs.c.status, UNFINISHED), free)
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
            result = conn.execute(update(runs).where(held_by(lease)).values(due_at=expires_at))
        return bool(result.rowcount)

    def renew_leases(self, leases: Sequence[Lease], expires_at: datetime) -> list[Lease]:
        """Extend held leases in one UPDATE; return those lost."""
        if not leases:
            return []
        held = tuple_(runs.c.id, runs.c.fence).in_([(held.run_id, held.fence) for held in leases])
        stmt = (
            update(runs)
            .where(held, row_has(runs.c.status, RUNNING))
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
        return [step_from_row(row) for row in rows]

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
        ).where(held_by(lease))
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

    def release(self, lease: Lease, now: datetime, due_at: datetime | None = None) -> None:
        """Give the run back so that any worker resumes it at once (from ``due_at`` if given)."""
        with self._one() as conn:
            self._update_held(
                conn,
                lease,
                status=RunStatus.PENDING.value,
                lease_owner=None,
                due_at=due_at or now,
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
            **held_params(lease),
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
            .where(runs.c.id == run_id, row_has(runs.c.status, RunStatus.FAILED.value))
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
        params = {"run_id": run_id, "event_key": key}
        with translated():
            rows = self._driver.execute(self._event, params, fetch=True).rows
        if not rows:
            return None
        return Event(key=rows[0].key, data=rows[0].data, delivered_at=rows[0].delivered_at)

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
        return run_from_row(row)

    def _check_lease(self, conn: Connection, lease: Lease) -> None:
        if conn.execute(select(runs.c.id).where(held_by(lease))).first() is None:
            raise LeaseLost(lease.run_id, lease.fence)

    def _update_held(self, conn: Connection, lease: Lease, **values: Any) -> None:
        if not conn.execute(update(runs).where(held_by(lease)).values(**values)).rowcount:
            raise LeaseLost(lease.run_id, lease.fence)

    def _has_event(self, conn: Connection, run_id: RunId, key: str) -> bool:
        query = select(exists().where(events.c.run_id == run_id, events.c.key == key))
        return bool(conn.execute(query).scalar())
