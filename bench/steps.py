"""Signoff's cost per journaled step, beside the same work done raw and peer engines.

Run ``python -m bench.steps`` (``--quick`` for a short run, ``--no-peers`` to skip DBOS
and LangGraph, ``--only SECTION`` for one table).  It measures, on SQLite (a temporary
file, WAL + ``synchronous=FULL`` as the engine's store sets it) and PostgreSQL
(``SIGNOFF_BENCH_PG_URL``, default the local server; the engine's tables in a fresh
schema, dropped afterwards):

* sequential: µs per step of one ``bench.payload`` run of 20 and of 200 steps (each step
  called with arguments, returning 226 bytes of JSON), timed from before
  ``Runtime.start`` to the commit of the run's completion: run creation, the wake-up
  and pick-up by a ``Worker`` serving in the background (started once, as in
  production), the claim, every step and the completion.  Beside it, measured in the
  same process on the same database (on SQLite, the very file), the same run written
  raw (``bench.raw.RawRuns``): a run row, one row per step with the same JSON, the
  final update, each committed before the next.  The primary ratio is against the
  same round trips (each statement alone, autocommit: what the engine does); the
  BEGIN/INSERT/COMMIT column (three round trips on PostgreSQL) is for reference.  The
  contestants take turns repeat by repeat, in rotating order; the ratio is the median
  of the per-repeat ratios, with its interquartile range.
* journal (the statement the hot path uses): µs per append of the fenced
  ``INSERT … SELECT`` on a driver connection (what ``SqlStore`` does) and through
  SQLAlchemy Core (``Connection.execute`` of the same statement, built once, on an
  autocommit connection), interleaved.
* concurrent (PostgreSQL): total steps/s of 8 payload runs x 50 steps on one worker of
  concurrency 8, beside 8 raw connections each writing 50 rows, autocommit.
* journal bytes (PostgreSQL): ``pg_total_relation_size('steps') / rows`` (heap,
  indexes, TOAST) after sequential ``bench.trivial`` runs, beside the raw table (same ``uuid``
  key type, same rows per run) measured the same way.
* crash-resume: a 200-step payload run whose worker process is SIGKILLed right after
  its 150th entry commits; once its lease has expired, the time another worker takes
  from the start of its claim to the write of entry 151 (claim + journal load + replay
  of 150 steps), and the replay alone.
* peers (when the ``bench`` extra is installed): DBOS and LangGraph (``bench.peers``,
  steps without payload), each run taking turns with a Signoff run of the same length.

Each table says which bar it checks.  The machine's noise moves single numbers by tens
of per cent: read the ratios and their spread, and rerun before drawing conclusions.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, text
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
    Workflows,
)
from agent_runtime.notices import Notice
from bench import peers, raw
from bench._common import (
    Paired,
    create_schema,
    default_dsn,
    drop_schema,
    fresh_name,
    interleave,
    sqlalchemy_pg_url,
    table,
    take_turns,
)
from bench.workloads import TRIVIAL, WORKFLOW, step_output_json, workloads
from store import build_engine, upgrade
from store.sql_store import SqlStore, fenced_append_params, fenced_append_statement

STEP_COUNTS = (20, 200)
CONCURRENT_RUNS = 8
CONCURRENT_STEPS = 50
RESUME_STEPS = 200
RESUME_AT = 150
APPENDS = 200
STEP_BAR = 1.2  # engine / same-round-trip raw, 200 payload steps
CONCURRENT_BAR = 0.5  # engine / raw throughput
BYTES_BAR = 1.5  # engine / raw bytes per step
RESUME_BAR_MS = 50.0
RUN_TIMEOUT_S = 120
CRASH_LEASE = timedelta(milliseconds=600)


@dataclass(frozen=True, slots=True)
class Settings:
    """How long to measure."""

    repeats: int
    byte_rows: int
    resume_repeats: int
    peer_repeats: int


FULL = Settings(repeats=25, byte_rows=10_000, resume_repeats=9, peer_repeats=5)
QUICK = Settings(repeats=7, byte_rows=2_000, resume_repeats=3, peer_repeats=1)


def bench_workflows() -> Workflows:
    """``bench.payload``, and ``bench.trivial`` for the byte count."""
    return workloads()


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
def raw_beside(store: TimedStore, dsn: str) -> Iterator[raw.RawRuns]:
    """Raw runs on the store's database: on SQLite the very file, on PostgreSQL the server."""
    if store.engine.dialect.name == "sqlite":
        path = store.engine.url.database
        assert path is not None
        with raw.raw_sqlite_runs(path) as runs:
            yield runs
    else:
        with raw.raw_pg_runs(dsn) as runs:
            yield runs


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
        self.runtime = Runtime(store, bench_workflows())
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
    Runtime(store, bench_workflows()).worker(options).run()


def engine_crash_resume(store: TimedStore) -> ResumeCost:
    """Run a payload run in a worker process killed after ``RESUME_AT`` entries; once its
    lease has expired, time the resume in this process."""
    runtime = Runtime(store, bench_workflows())
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


# ----------------------------------------------------------------------- measuring


@dataclass(frozen=True, slots=True)
class Sequential:
    """Engine beside the same-round-trip raw run (paired), and the BEGIN/COMMIT raw median."""

    pair: Paired
    transactions: float


def sequential(settings: Settings, dsn: str) -> dict[tuple[str, int], Sequential]:
    """Seconds per step, engine and raw, for each backend and step count."""
    results: dict[tuple[str, int], Sequential] = {}
    for backend, open_store in BACKENDS.items():
        with (
            open_store(dsn) as store,
            ServingWorker(store) as worker,
            raw_beside(store, dsn) as base,
        ):
            for n in STEP_COUNTS:
                results[backend, n] = _sequential(settings, worker, store, base, n)
    return results


def _sequential(
    settings: Settings, worker: ServingWorker, store: TimedStore, base: raw.RawRuns, n: int
) -> Sequential:
    outputs = [step_output_json(index) for index in range(n)]
    samples = take_turns(
        {
            "engine": lambda: engine_step_seconds(worker, store, n),
            "raw": lambda: base.run_step_seconds(outputs),
            "transactions": lambda: base.run_step_seconds(outputs, transactions=True),
        },
        settings.repeats,
    )
    pairs = tuple(zip(samples["engine"], samples["raw"], strict=True))
    return Sequential(Paired(pairs), statistics.median(samples["transactions"]))


def journal(settings: Settings, dsn: str) -> dict[str, tuple[Paired, Paired]]:
    """Per append, wall and client CPU: SQLAlchemy Core (the pairs' first) beside the
    store's driver path, on each backend."""
    results: dict[str, tuple[Paired, Paired]] = {}
    for backend, open_store in BACKENDS.items():
        with open_store(dsn) as store:
            results[backend] = (
                _journal(settings, store, time.perf_counter),
                _journal(settings, store, time.thread_time),
            )
    return results


def _journal(settings: Settings, store: TimedStore, clock: Callable[[], float]) -> Paired:
    runtime = Runtime(store, bench_workflows())
    runtime.start(WORKFLOW, {"n": 1})
    now = runtime.clock.now()
    ((_, lease),) = store.claim_runs("bench", limit=1, now=now, expires_at=now + timedelta(hours=1))
    positions = iter(range(0, 10**9, APPENDS))
    core = core_appender(store)
    return interleave(
        lambda: append_seconds(core, lease, next(positions), clock),
        lambda: append_seconds(store.append_step, lease, next(positions), clock),
        settings.repeats,
    )


def concurrent(settings: Settings, dsn: str) -> Paired:
    """Total steps/s of 8 x 50 payload steps on PostgreSQL, engine and raw."""
    with pg_store(dsn) as store, ServingWorker(store, CONCURRENT_RUNS) as worker:
        return interleave(
            lambda: engine_concurrent_steps_per_second(
                worker, store, CONCURRENT_RUNS, CONCURRENT_STEPS
            ),
            lambda: raw.raw_pg_concurrent_steps_per_second(
                dsn, CONCURRENT_RUNS, CONCURRENT_STEPS, output=step_output_json(0), autocommit=True
            ),
            settings.repeats,
        )


def journal_bytes(settings: Settings, dsn: str) -> Paired:
    """Bytes per trivial step on PostgreSQL, engine and raw (uuid key), 200 steps per run."""
    with pg_store(dsn) as store:
        engine = engine_bytes_per_step(store, settings.byte_rows, RESUME_STEPS)
    base = raw.raw_row_bytes_pg(dsn, settings.byte_rows, steps_per_run=RESUME_STEPS, key="uuid")
    return Paired(((engine, base),))


def resume(settings: Settings, dsn: str) -> dict[str, list[ResumeCost]]:
    """Crash-resume costs on each backend."""
    results: dict[str, list[ResumeCost]] = {}
    for backend, open_store in BACKENDS.items():
        with open_store(dsn) as store:
            engine_crash_resume(store)  # warm-up
            results[backend] = [engine_crash_resume(store) for _ in range(settings.resume_repeats)]
    return results


PeerFn = Callable[[int], float | None]


def peer_pairs(settings: Settings, dsn: str) -> dict[tuple[str, int], Paired | None]:
    """Each peer beside Signoff on the same backend, run for run (None: not installed)."""
    by_backend: dict[str, dict[str, PeerFn]] = {
        "sqlite": {
            "dbos": lambda n: peers.dbos_sqlite_step_seconds(n, 1),
            "langgraph": lambda n: peers.langgraph_sqlite_step_seconds(n, 1),
        },
        "postgres": {
            "dbos": lambda n: peers.dbos_pg_step_seconds(dsn, n, 1),
            "langgraph": lambda n: peers.langgraph_pg_step_seconds(dsn, n, 1),
        },
    }
    results: dict[tuple[str, int], Paired | None] = {}
    for backend, open_store in BACKENDS.items():
        with open_store(dsn) as store, ServingWorker(store) as worker:
            for peer, measure in by_backend[backend].items():
                for n in STEP_COUNTS:
                    results[f"{peer}/{backend}", n] = _peer_pair(
                        settings, worker, store, measure, n
                    )
    return results


def _peer_pair(
    settings: Settings, worker: ServingWorker, store: TimedStore, measure: PeerFn, n: int
) -> Paired | None:
    if measure(n) is None:
        return None

    def peer() -> float:
        seconds = measure(n)
        assert seconds is not None
        return seconds

    return interleave(
        lambda: engine_step_seconds(worker, store, n), peer, settings.peer_repeats, warmup=False
    )


# ------------------------------------------------------------------------ reporting


def verdict(ok: bool) -> str:
    """The text of a bar check."""
    return "ok" if ok else "MISSED"


def us(seconds: float) -> str:
    """Seconds as microseconds."""
    return f"{seconds * 1e6:,.0f}"


def spread(pair: Paired) -> str:
    """The interquartile range of a pair's ratios."""
    low, high = pair.quartiles
    return f"{low:.2f}-{high:.2f}"


def sequential_table(results: dict[tuple[str, int], Sequential], repeats: int) -> str:
    """The sequential per-step table."""
    rows = []
    for (backend, n), result in results.items():
        pair = result.pair
        bar = verdict(pair.ratio <= STEP_BAR) if n == max(STEP_COUNTS) else ""
        rows.append(
            [
                backend,
                str(n),
                us(pair.engine),
                us(pair.base),
                f"{pair.ratio:.2f}x",
                spread(pair),
                us(result.transactions),
                bar,
            ]
        )
    return table(
        f"Sequential {WORKFLOW} (226-byte outputs), start to completion (medians of {repeats} "
        f"rotating turns; engine/raw: median of the turns' ratios, IQR beside it); "
        f"bar: <= {STEP_BAR}x the same-round-trip raw at {max(STEP_COUNTS)} steps",
        [
            "backend",
            "steps",
            "engine µs/step",
            "raw µs/step",
            "engine/raw",
            "IQR",
            "raw BEGIN/COMMIT µs/step",
            "bar",
        ],
        rows,
    )


def journal_table(results: dict[str, tuple[Paired, Paired]], repeats: int) -> str:
    """The append path comparison: wall time, and the client's own CPU time."""
    rows = [
        [
            backend,
            us(wall.base),
            us(wall.engine),
            f"{wall.ratio:.2f}x",
            spread(wall),
            us(cpu.base),
            us(cpu.engine),
            f"{cpu.ratio:.2f}x",
            spread(cpu),
        ]
        for backend, (wall, cpu) in results.items()
    ]
    return table(
        f"One fenced journal append ({APPENDS} per turn, {repeats} interleaved pairs each for "
        "wall and CPU time): the store's driver connection beside SQLAlchemy Core's "
        "Connection.execute of the same statement",
        [
            "backend",
            "driver µs",
            "Core µs",
            "Core/driver",
            "IQR",
            "driver CPU µs",
            "Core CPU µs",
            "Core/driver CPU",
            "IQR",
        ],
        rows,
    )


def concurrent_table(pair: Paired, repeats: int) -> str:
    """The concurrent throughput table."""
    return table(
        f"PostgreSQL, {CONCURRENT_RUNS} concurrent payload runs x {CONCURRENT_STEPS} steps, one "
        f"worker ({repeats} pairs, as above); bar: >= {CONCURRENT_BAR:.0%} of raw",
        ["", "engine steps/s", f"raw {CONCURRENT_RUNS} conns steps/s", "engine/raw", "IQR", "bar"],
        [
            [
                "postgres",
                f"{pair.engine:,.0f}",
                f"{pair.base:,.0f}",
                f"{pair.ratio:.0%}",
                spread(pair),
                verdict(pair.ratio >= CONCURRENT_BAR),
            ]
        ],
    )


def bytes_table(pair: Paired, rows: int) -> str:
    """The journal size table."""
    return table(
        f"PostgreSQL journal bytes per trivial step, pg_total_relation_size / rows "
        f"({rows:,} rows, {RESUME_STEPS} per run, uuid keys); bar: <= {BYTES_BAR}x raw",
        ["", "engine B/step", "raw B/row", "engine/raw", "bar"],
        [
            [
                "postgres",
                f"{pair.engine:.1f}",
                f"{pair.base:.1f}",
                f"{pair.ratio:.2f}x",
                verdict(pair.ratio <= BYTES_BAR),
            ]
        ],
    )


def resume_table(results: dict[str, list[ResumeCost]], repeats: int) -> str:
    """The crash-resume cost table."""
    rows = []
    for backend, costs in results.items():
        totals = sorted(c.total * 1e3 for c in costs)
        rows.append(
            [
                backend,
                f"{statistics.median(totals):.1f}",
                f"{totals[0]:.1f}-{totals[-1]:.1f}",
                f"{statistics.median(c.replay for c in costs) * 1e3:.1f}",
                verdict(statistics.median(totals) < RESUME_BAR_MS),
            ]
        )
    return table(
        f"Crash-resume of a {RESUME_STEPS}-step payload run whose worker was SIGKILLed after "
        f"{RESUME_AT} entries (median of {repeats}); bar: < {RESUME_BAR_MS:.0f} ms",
        ["backend", "claim to first live write ms", "range", "replay alone ms", "bar"],
        rows,
    )


def peers_table(results: dict[tuple[str, int], Paired | None], repeats: int) -> str:
    """Each peer beside Signoff, run for run."""
    rows = []
    for (name, n), pair in results.items():
        if pair is None:
            rows.append([name, str(n), "", "not installed", "", ""])
            continue
        rows.append(
            [name, str(n), us(pair.engine), us(pair.base), f"{1 / pair.ratio:.1f}x", spread(pair)]
        )
    return table(
        f"Peers, µs per step, each run taking turns with a Signoff payload run ({repeats} "
        "pairs; peers' steps carry no payload); peer/signoff: median of the pairs",
        ["peer", "steps", "signoff µs", "peer µs", "peer/signoff", "signoff/peer IQR"],
        rows,
    )


SECTIONS = ["sequential", "journal", "concurrent", "bytes", "resume", "peers"]


def main(argv: list[str] | None = None) -> None:
    """Run every measurement and print the tables."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.steps", description="Signoff's cost per journaled step."
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats and rows")
    parser.add_argument("--no-peers", action="store_true", help="skip DBOS and LangGraph")
    parser.add_argument("--only", choices=SECTIONS, help="run one section only")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    dsn = default_dsn()

    def wanted(section: str) -> bool:
        return args.only in (None, section)

    if wanted("sequential"):
        print(sequential_table(sequential(settings, dsn), settings.repeats), flush=True)
    if wanted("journal"):
        print(journal_table(journal(settings, dsn), settings.repeats), flush=True)
    if wanted("concurrent"):
        print(concurrent_table(concurrent(settings, dsn), settings.repeats), flush=True)
    if wanted("bytes"):
        print(bytes_table(journal_bytes(settings, dsn), settings.byte_rows), flush=True)
    if wanted("resume"):
        print(resume_table(resume(settings, dsn), settings.resume_repeats), flush=True)
    if wanted("peers") and not args.no_peers:
        print(peers_table(peer_pairs(settings, dsn), settings.peer_repeats), flush=True)


if __name__ == "__main__":
    main()
