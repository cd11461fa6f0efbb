"""The engine under measurement for ``bench.steps``: a store that marks when each run was
created and completed, the stores on SQLite and PostgreSQL beside their raw twins, and the
runs, appends, crash-resumes and byte counts each table times."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import pq
from sqlalchemy import Engine, bindparam, insert, text
from sqlalchemy.engine import make_url

from agent_runtime import (
    ErrorInfo,
    Lease,
    Run,
    RunId,
    RunStatus,
    Runtime,
    StepKind,
    StepRecord,
    WorkerOptions,
)
from agent_runtime.ids import new_run_id
from agent_runtime.notices import Notice
from agent_runtime.serialization import input_hash
from bench import raw
from bench._common import (
    create_schema,
    drop_schema,
    fresh_name,
    sqlalchemy_pg_url,
)
from bench.workloads import TRIVIAL, WORKFLOW, step_output, workloads
from store import build_engine, upgrade
from store.driver import DriverConnections, Prepared
from store.engine import POOLING
from store.models import runs
from store.plain_statements import plain_statement
from store.run_sql import (
    end_statement,
    fenced_append_params,
    fenced_append_statement,
    held_params,
)
from store.sql_store import SqlStore

RESUME_STEPS = 200
RESUME_AT = 150
APPENDS = 200
RUN_TIMEOUT_S = 120
CRASH_LEASE = timedelta(milliseconds=600)
FLOOR_LEASE = timedelta(hours=1)


# ------------------------------------------------------------------ instrumented store


@dataclass(slots=True)
class RunMarks:
    """``time.perf_counter()`` marks of one execution of a run (one claim)."""

    claim_started: float
    journal_loaded: float | None = None
    first_append: float | None = None
    completed: float | None = None


class TimedStore(SqlStore):
    """A SqlStore that notes when each run is claimed, loaded, first appended to and completed.

    ``on_append`` is called after every committed journal entry (used to kill a worker
    part-way through a run).
    """

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.marks: dict[RunId, RunMarks] = {}
        self.on_append: Callable[[StepRecord], None] | None = None
        self._ended: dict[RunId, threading.Event] = {}
        self._lock = threading.Lock()

    def ended(self, run_id: RunId) -> threading.Event:
        """An event set when the run completes or fails."""
        with self._lock:
            return self._ended.setdefault(run_id, threading.Event())

    def claim_runs(
        self, owner: str, *, limit: int, now: datetime, expires_at: datetime
    ) -> list[tuple[Run, Lease]]:
        """Claim, noting when the claim started for every run it returns."""
        started = time.perf_counter()
        claimed = super().claim_runs(owner, limit=limit, now=now, expires_at=expires_at)
        for run, _ in claimed:
            self.marks[run.id] = RunMarks(claim_started=started)
        return claimed

    def load_journal(self, run_id: RunId) -> list[StepRecord]:
        """Load, noting when the claimed run's journal was loaded."""
        journal = super().load_journal(run_id)
        marks = self.marks.get(run_id)
        if marks is not None and marks.journal_loaded is None:
            marks.journal_loaded = time.perf_counter()
        return journal

    def append_step(self, lease: Lease, step: StepRecord, notices: Sequence[Notice] = ()) -> None:
        """Append, noting when the first live write of this execution started."""
        marks = self.marks[lease.run_id]
        if marks.first_append is None:
            marks.first_append = time.perf_counter()
        super().append_step(lease, step, notices)
        if self.on_append is not None:
            self.on_append(step)

    def complete(
        self, lease: Lease, output: Any, now: datetime, notices: Sequence[Notice] = ()
    ) -> None:
        """Complete, noting when the completion committed."""
        super().complete(lease, output, now, notices)
        self.marks[lease.run_id].completed = time.perf_counter()
        self.ended(lease.run_id).set()

    def fail(
        self, lease: Lease, error: ErrorInfo, now: datetime, notices: Sequence[Notice] = ()
    ) -> None:
        """Fail, letting a waiting benchmark know."""
        super().fail(lease, error, now, notices)
        self.ended(lease.run_id).set()


# ---------------------------------------------------------------------- store set-up


@contextlib.contextmanager
def sqlite_store() -> Iterator[TimedStore]:
    """A migrated store on a fresh SQLite file in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="signoff-bench-") as tmp:
        engine = build_engine("sqlite:///" + os.path.join(tmp, "signoff.db"))
        try:
            upgrade(engine)
            yield TimedStore(engine)
        finally:
            engine.dispose()


@contextlib.contextmanager
def pg_store(dsn: str) -> Iterator[TimedStore]:
    """A migrated store in a fresh PostgreSQL schema, dropped afterwards."""
    schema = fresh_name("bench_signoff")
    create_schema(dsn, schema)
    try:
        url = make_url(sqlalchemy_pg_url(dsn)).update_query_dict(
            {"options": f"-csearch_path={schema}"}
        )
        engine = build_engine(url.render_as_string(hide_password=False))
        try:
            upgrade(engine)
            yield TimedStore(engine)
        finally:
            engine.dispose()
    finally:
        drop_schema(dsn, schema)


@contextlib.contextmanager
def sent_whole(store: TimedStore) -> Iterator[SqlStore]:
    """A store on ``store``'s database whose statements are sent whole each time, nothing
    prepared by name: the way behind a pooler in transaction mode (``pooling=transaction``)."""
    url = store.engine.url.update_query_dict({POOLING: "transaction"})
    engine = build_engine(url.render_as_string(hide_password=False))
    try:
        yield SqlStore(engine)
    finally:
        engine.dispose()


@contextlib.contextmanager
def raw_beside(store: TimedStore, dsn: str) -> Iterator[tuple[raw.RawRuns, raw.RawRuns | None]]:
    """Raw runs on the store's database: on SQLite the very file; on PostgreSQL the server,
    through libpq's own call (as the engine's journal entries go), and beside them, for
    reference, through psycopg's ``Connection.execute`` (None on SQLite)."""
    if store.engine.dialect.name == "sqlite":
        path = store.engine.url.database
        assert path is not None
        with raw.raw_sqlite_runs(path) as runs:
            yield runs, None
    else:
        with raw.raw_pg_runs(dsn, "libpq") as runs, raw.raw_pg_runs(dsn, "psycopg") as cursor:
            yield runs, cursor


BACKENDS: dict[str, Callable[[str], contextlib.AbstractContextManager[TimedStore]]] = {
    "sqlite": lambda dsn: sqlite_store(),
    "postgres": pg_store,
}


# ------------------------------------------------------------------------ execution


class ServingWorker:
    """A worker running in the background, as in production: it is started once, and its
    threads serve run after run; each benchmark run wakes it up when it is started."""

    def __init__(self, store: TimedStore, concurrency: int = 1) -> None:
        self._store = store
        self.runtime = Runtime(store, workloads())
        options = WorkerOptions(concurrency=concurrency, poll_interval=timedelta(seconds=1))
        self._worker = self.runtime.worker(options)
        self._thread = threading.Thread(target=self._worker.run, name="bench-worker", daemon=True)

    def __enter__(self) -> ServingWorker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._worker.stop()
        self._thread.join()

    def run(self, workflow: str, steps: int, runs: int = 1) -> tuple[float, list[Run]]:
        """Start ``runs`` runs of ``steps`` steps and wait for their end; return the
        ``perf_counter()`` before the first start, and the runs."""
        begun = time.perf_counter()
        started = [self.runtime.start(workflow, {"n": steps}) for _ in range(runs)]
        self._worker.wake()
        for run in started:
            if not self._store.ended(run.id).wait(RUN_TIMEOUT_S):
                raise RuntimeError(f"run {run.id} did not end within {RUN_TIMEOUT_S} s")
            done = self.runtime.get(run.id)
            if done.status is not RunStatus.COMPLETED or done.output != {"steps": steps}:
                raise RuntimeError(f"run {run.id} ended {done.status}: {done.output or done.error}")
        return begun, started


def engine_step_seconds(worker: ServingWorker, store: TimedStore, steps: int) -> float:
    """Seconds per step of one payload run, from before its start to its completion."""
    begun, (run,) = worker.run(WORKFLOW, steps)
    completed = store.marks[run.id].completed
    assert completed is not None
    return (completed - begun) / steps


def engine_concurrent_steps_per_second(
    worker: ServingWorker, store: TimedStore, runs: int, steps: int
) -> float:
    """Total steps/s of ``runs`` concurrent payload runs on one worker: first start to
    last completion."""
    begun, started = worker.run(WORKFLOW, steps, runs=runs)
    end = max(store.marks[run.id].completed or 0.0 for run in started)
    return runs * steps / (end - begun)


def append_seconds(
    append: Callable[[Lease, StepRecord], object],
    lease: Lease,
    first: int,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Seconds per append of ``APPENDS`` payload entries from position ``first``, by
    ``clock`` (``time.thread_time`` for the client's own CPU time)."""
    records = [_entry(first + index) for index in range(APPENDS)]
    start = clock()
    for record in records:
        append(lease, record)
    return (clock() - start) / APPENDS


def _entry(position: int) -> StepRecord:
    now = datetime.now().astimezone()
    output = {"index": position, "label": "bench", "text": "x" * 180}
    return StepRecord(
        position=position,
        kind=StepKind.STEP,
        name=f"step {position}",
        input_hash="0123456789abcdef",
        output=output,
        started_at=now,
        finished_at=now,
    )


def core_appender(store: TimedStore) -> Callable[[Lease, StepRecord], object]:
    """The same fenced append through SQLAlchemy's ``Connection``: the statement built
    once, on an autocommit connection (PostgreSQL) or an immediate transaction (SQLite)."""
    statement = fenced_append_statement(store.engine.dialect.name == "postgresql")
    if store.engine.dialect.name == "postgresql":
        engine = store.engine.execution_options(isolation_level="AUTOCOMMIT")

        def append(lease: Lease, step: StepRecord) -> object:
            with engine.connect() as conn:
                return conn.execute(statement, fenced_append_params(lease, step)).rowcount

        return append

    def append_in_transaction(lease: Lease, step: StepRecord) -> object:
        with store.engine.begin() as conn:
            return conn.execute(statement, fenced_append_params(lease, step)).rowcount

    return append_in_transaction


def cursor_appender(store: TimedStore) -> Callable[[Lease, StepRecord], object]:
    """The fenced append compiled once (``Prepared``) and run on a driver connection's
    psycopg cursor: the store's PostgreSQL path before libpq's own call replaced it."""
    prepared = Prepared(fenced_append_statement(postgres=True), store.engine.dialect)
    connections = DriverConnections(store.engine)

    def append(lease: Lease, step: StepRecord) -> object:
        return connections.execute(prepared, fenced_append_params(lease, step)).rowcount

    return append


class StatementFloor:
    """The engine's own statements for a payload run, their parameters encoded before the
    clock starts, sent one after another on one connection of the store's engine (libpq's
    own call with prepared statements on PostgreSQL): the run's row, inserted already
    claimed (the engine creates it, then claims it), each step's fenced append with the
    entry the engine writes, and the run's end. No client work is timed: what any client
    of this schema would pay at the least, the database's share of the engine's
    statements."""

    def __init__(self, store: TimedStore) -> None:
        dialect = store.engine.dialect
        self._postgres = dialect.name == "postgresql"
        self._create = plain_statement(_claimed_run(), dialect, "floor_create")
        self._append = plain_statement(
            fenced_append_statement(self._postgres), dialect, "floor_append"
        )
        self._end = plain_statement(end_statement(), dialect, "floor_end")
        pooled = store.engine.raw_connection()  # the engine's session settings
        pooled.detach()
        connection: Any = pooled.dbapi_connection
        if self._postgres:
            connection.autocommit = True
            for statement in (self._create, self._append, self._end):
                _prepared(connection.pgconn, statement)
        self._connection = connection
        self.last_run: RunId | None = None
        """The run the last ``run_step_seconds`` wrote."""

    def close(self) -> None:
        """Close its connection."""
        self._connection.close()

    def run_step_seconds(self, steps: int) -> float:
        """Seconds per step of one run of ``steps`` payload steps, its row to its end."""
        lease = Lease(new_run_id(), "floor", 1)
        self.last_run = lease.run_id
        now = datetime.now(UTC)
        later = now + FLOOR_LEASE  # no serving worker takes the run over meanwhile
        statements = [
            (self._create, {"id": lease.run_id, "input": {"n": steps}, "now": now, "due": later}),
            *(
                (self._append, fenced_append_params(lease, payload_entry(index, now)))
                for index in range(steps)
            ),
            (
                self._end,
                {
                    **held_params(lease),
                    "end_status": "completed",
                    "end_output": {"steps": steps},
                    "end_error": None,
                    "end_at": now,
                },
            ),
        ]
        if self._postgres:
            pgconn = self._connection.pgconn
            sent = [
                (_name(s), [None if p is None else p.encode() for p in s.params(v)])
                for s, v in statements
            ]
            start = time.perf_counter()
            for name, params in sent:
                _wrote_one(pgconn.exec_prepared(name, params))
        else:
            cursor = self._connection.cursor()
            given = [(s.sql, s.params(v)) for s, v in statements]
            start = time.perf_counter()
            for sql, params in given:
                cursor.execute(sql, params)
                if cursor.rowcount != 1:
                    raise RuntimeError(f"wrote {cursor.rowcount} rows: {sql}")
        return (time.perf_counter() - start) / steps


def payload_entry(index: int, now: datetime) -> StepRecord:
    """The journal entry the engine writes for step ``index`` of ``bench.payload``."""
    return StepRecord(
        position=index,
        kind=StepKind.STEP,
        name=f"step {index}",
        input_hash=input_hash([index, "bench"]),
        output=step_output(index, "bench"),
        started_at=now,
        finished_at=now,
    )


def _claimed_run() -> Any:
    """A payload run's row, running under fence 1 (as the engine's claim leaves it), its
    lease lapsing at ``:due``."""
    now = bindparam("now", type_=runs.c.created_at.type)
    return insert(runs).values(
        id=bindparam("id", type_=runs.c.id.type),
        workflow=WORKFLOW,
        status=RunStatus.RUNNING.value,
        input=bindparam("input", type_=runs.c.input.type),
        created_at=now,
        updated_at=now,
        due_at=bindparam("due", type_=runs.c.due_at.type),
        lease_owner="floor",
        fence=1,
    )


def _name(statement: Any) -> bytes:
    return f"floor_{id(statement)}".encode()


def _prepared(pgconn: Any, statement: Any) -> None:
    _wrote_one(pgconn.prepare(_name(statement), statement.sql.encode(), None), rows=False)


def _wrote_one(result: Any, *, rows: bool = True) -> None:
    """Check a libpq result: it succeeded (and, if ``rows``, changed one row)."""
    if result.status != pq.ExecStatus.COMMAND_OK:
        raise RuntimeError((result.error_message or b"").decode(errors="replace"))
    if rows and result.command_tuples != 1:
        raise RuntimeError(f"changed {result.command_tuples} rows")


@dataclass(frozen=True, slots=True)
class ResumeCost:
    """Seconds from claim start to the first live write, and from journal loaded to it."""

    total: float
    replay: float


def crashing_worker(url: str, stop_after: int) -> None:
    """A worker process that SIGKILLs itself right after entry ``stop_after`` commits."""
    store = TimedStore(build_engine(url))

    def kill(step: StepRecord) -> None:
        if step.position == stop_after - 1:
            os.kill(os.getpid(), signal.SIGKILL)

    store.on_append = kill
    options = WorkerOptions(
        concurrency=1, lease_ttl=CRASH_LEASE, poll_interval=timedelta(milliseconds=20)
    )
    Runtime(store, workloads()).worker(options).run()


def engine_crash_resume(store: TimedStore) -> ResumeCost:
    """Run a payload run in a worker process killed after ``RESUME_AT`` entries; once its
    lease has expired, time the resume in this process."""
    runtime = Runtime(store, workloads())
    run = runtime.start(WORKFLOW, {"n": RESUME_STEPS})
    url = store.engine.url.render_as_string(hide_password=False)
    child = multiprocessing.get_context("spawn").Process(
        target=crashing_worker, args=(url, RESUME_AT)
    )
    child.start()
    child.join(RUN_TIMEOUT_S)
    if child.exitcode != -signal.SIGKILL:
        child.kill()
        raise RuntimeError(f"the crashing worker ended with {child.exitcode}")
    if len(runtime.journal(run.id)) != RESUME_AT:
        raise RuntimeError(f"the killed worker did not journal {RESUME_AT} steps")
    _wait_for_lease_expiry(runtime, run.id)
    options = WorkerOptions(concurrency=1, lease_ttl=CRASH_LEASE)
    if runtime.worker(options).run_once() != 1:
        raise RuntimeError("the crashed run was not taken over")
    marks = store.marks[run.id]
    if runtime.get(run.id).status is not RunStatus.COMPLETED or marks.first_append is None:
        raise RuntimeError("the resumed run did not complete")
    assert marks.journal_loaded is not None
    return ResumeCost(
        total=marks.first_append - marks.claim_started,
        replay=marks.first_append - marks.journal_loaded,
    )


def _wait_for_lease_expiry(runtime: Runtime, run_id: RunId) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        due = runtime.get(run_id).due_at
        if due is not None and due <= runtime.clock.now():
            return
        time.sleep(0.02)
    raise RuntimeError("the killed worker's lease never expired")


def engine_bytes_per_step(store: TimedStore, rows: int, steps_per_run: int) -> float:
    """``pg_total_relation_size('steps') / rows`` after ``rows`` trivial steps, run by run."""
    with ServingWorker(store) as worker:
        for _ in range(rows // steps_per_run):
            worker.run(TRIVIAL, steps_per_run)
    with store.engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM steps")).scalar_one()
        size = conn.execute(text("SELECT pg_total_relation_size('steps'::regclass)")).scalar_one()
    return float(size) / float(count)
