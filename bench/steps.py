"""Signoff's own cost per journaled step, beside the physical limit and peer engines.

Run ``python -m bench.steps`` (``--quick`` for a short run, ``--no-peers`` to skip DBOS
and LangGraph, ``--only SECTION`` for one table).  It measures, on SQLite (a temporary
file, WAL + ``synchronous=FULL`` as the engine's store sets it) and PostgreSQL
(``SIGNOFF_BENCH_PG_URL``, default the local server; the engine's tables in a fresh
schema, dropped afterwards):

* sequential: µs per step of one ``demo.trivial`` run of 20 and of 200 steps, run by
  ``Runtime.start`` + a ``Worker`` serving in the background (started once, as in
  production, and woken for each run), timed from the start of its claim to the end of
  its completion (process and worker start-up excluded), beside ``bench.raw``'s
  INSERT + COMMIT per step on the same database (on SQLite, the very file the engine
  uses), measured in the same process, interleaved repeat by repeat.  Medians of
  several repeats, after an untimed warm-up.
* concurrent (PostgreSQL): total steps/s of 8 runs x 50 steps on one worker of
  concurrency 8, beside 8 raw connections committing 50 rows each.
* journal bytes (PostgreSQL): ``pg_total_relation_size('steps') / rows`` (heap,
  indexes, TOAST) after sequential trivial runs, beside the raw table (same ``uuid``
  key type, same rows per run) measured the same way.
* resume: a 200-step run stopped after 150 journaled steps and released; the time
  another worker takes from the start of its claim to the write of step 151 (claim +
  journal load + replay of 150 steps), and the replay alone.
* peers (when the ``bench`` extra is installed): DBOS and LangGraph, ``bench.peers``.

Each table says which bar it checks.  The machine's noise moves single numbers by tens
of per cent: read the medians, and rerun before drawing conclusions.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
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
    StepRecord,
    WorkerOptions,
)
from agent_runtime.notices import Notice
from bench import peers, raw
from bench._common import create_schema, default_dsn, drop_schema, fresh_name, sqlalchemy_pg_url
from devkit.demo.workflows import demo_workflows
from store import build_engine, upgrade
from store.sql_store import SqlStore

STEP_COUNTS = (20, 200)
CONCURRENT_RUNS = 8
CONCURRENT_STEPS = 50
RESUME_STEPS = 200
RESUME_AT = 150
STEP_BAR = 1.5  # engine / raw, sequential 200 steps
CONCURRENT_BAR = 0.5  # engine / raw throughput
BYTES_BAR = 1.5  # engine / raw bytes per step
RESUME_BAR_MS = 50.0
RUN_TIMEOUT_S = 120


@dataclass(frozen=True, slots=True)
class Settings:
    """How long to measure."""

    repeats: int
    byte_rows: int
    peer_repeats: int


FULL = Settings(repeats=15, byte_rows=10_000, peer_repeats=3)
QUICK = Settings(repeats=5, byte_rows=2_000, peer_repeats=1)


# ------------------------------------------------------------------ instrumented store


@dataclass(slots=True)
class RunMarks:
    """``time.perf_counter()`` marks of one execution of a run (one claim)."""

    claim_started: float
    journal_loaded: float | None = None
    first_append: float | None = None
    completed: float | None = None

    def elapsed(self) -> float:
        """Seconds from the start of the claim to the end of the completion."""
        assert self.completed is not None, "the run did not complete"
        return self.completed - self.claim_started


class TimedStore(SqlStore):
    """A SqlStore that notes when each run is claimed, loaded, first appended to and completed.

    ``on_append`` is called after every committed journal entry (used to stop a worker
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


# ------------------------------------------------------------------------ execution


class ServingWorker:
    """A worker running in the background, as in production: it is started once, and its
    threads serve run after run; each benchmark run wakes it up when it is started."""

    def __init__(self, store: TimedStore, concurrency: int = 1) -> None:
        self._store = store
        self.runtime = Runtime(store, demo_workflows())
        options = WorkerOptions(concurrency=concurrency, poll_interval=timedelta(seconds=1))
        self._worker = self.runtime.worker(options)
        self._thread = threading.Thread(target=self._worker.run, name="bench-worker", daemon=True)

    def __enter__(self) -> ServingWorker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._worker.stop()
        self._thread.join()

    def run_trivial(self, steps: int, runs: int = 1) -> list[Run]:
        """Start ``runs`` ``demo.trivial`` runs of ``steps`` steps and wait for their end."""
        started = [self.runtime.start("demo.trivial", {"n": steps}) for _ in range(runs)]
        self._worker.wake()
        for run in started:
            if not self._store.ended(run.id).wait(RUN_TIMEOUT_S):
                raise RuntimeError(f"run {run.id} did not end within {RUN_TIMEOUT_S} s")
            done = self.runtime.get(run.id)
            if done.status is not RunStatus.COMPLETED or done.output != {"steps": steps}:
                raise RuntimeError(f"run {run.id} ended {done.status}: {done.output or done.error}")
        return started


def engine_step_seconds(worker: ServingWorker, store: TimedStore, steps: int) -> float:
    """Seconds per step of one sequential run, from claim to completion."""
    (run,) = worker.run_trivial(steps)
    return store.marks[run.id].elapsed() / steps


def engine_concurrent_steps_per_second(
    worker: ServingWorker, store: TimedStore, runs: int, steps: int
) -> float:
    """Total steps/s of ``runs`` concurrent runs on one worker: first claim to last completion."""
    started = worker.run_trivial(steps, runs=runs)
    marks = [store.marks[run.id] for run in started]
    begin = min(m.claim_started for m in marks)
    end = max(m.completed for m in marks if m.completed is not None)
    return runs * steps / (end - begin)


@dataclass(frozen=True, slots=True)
class ResumeCost:
    """Seconds from claim start to the first live write, and from journal loaded to it."""

    total: float
    replay: float


def engine_resume_cost(store: TimedStore, steps: int, stop_after: int) -> ResumeCost:
    """Journal ``stop_after`` steps of a ``steps``-step run, release it, and time the resume."""
    runtime = Runtime(store, demo_workflows())
    run = runtime.start("demo.trivial", {"n": steps})
    options = WorkerOptions(concurrency=1, poll_interval=timedelta(milliseconds=20))
    first = runtime.worker(options)

    def stop_at(step: StepRecord) -> None:
        if step.position == stop_after - 1:
            first.stop()

    store.on_append = stop_at
    try:
        first.run(until_idle=True)
    finally:
        store.on_append = None
    if runtime.get(run.id).status is not RunStatus.PENDING:
        raise RuntimeError("the interrupted run was not released")
    if len(runtime.journal(run.id)) != stop_after:
        raise RuntimeError(f"the interrupted run did not journal {stop_after} steps")
    runtime.worker(options).run(until_idle=True)
    marks = store.marks[run.id]
    if runtime.get(run.id).status is not RunStatus.COMPLETED or marks.first_append is None:
        raise RuntimeError("the resumed run did not complete")
    assert marks.journal_loaded is not None
    return ResumeCost(
        total=marks.first_append - marks.claim_started,
        replay=marks.first_append - marks.journal_loaded,
    )


def engine_bytes_per_step(store: TimedStore, rows: int, steps_per_run: int) -> float:
    """``pg_total_relation_size('steps') / rows`` after ``rows`` trivial steps, run by run."""
    with ServingWorker(store) as worker:
        for _ in range(rows // steps_per_run):
            worker.run_trivial(steps_per_run)
    with store.engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM steps")).scalar_one()
        size = conn.execute(text("SELECT pg_total_relation_size('steps'::regclass)")).scalar_one()
    return float(size) / float(count)


# ----------------------------------------------------------------------- measuring


@dataclass(frozen=True, slots=True)
class Pair:
    """An engine figure beside the raw one (medians of the repeats) and engine / raw.

    The ratio is the median of the ratios of the repeats, each taken from an engine
    and a raw measurement made one right after the other: on a shared machine whose
    load comes in bursts, the two halves of a pair see the same conditions.
    """

    engine: float
    raw: float
    ratio: float


def interleaved(engine: Callable[[], float], base: Callable[[], float], repeats: int) -> Pair:
    """Measure ``engine`` then ``base``, ``repeats`` times, after one untimed call of each."""
    engine()
    base()
    pairs = [(engine(), base()) for _ in range(repeats)]
    return Pair(
        engine=statistics.median(e for e, _ in pairs),
        raw=statistics.median(b for _, b in pairs),
        ratio=statistics.median(e / b for e, b in pairs),
    )


def sequential(settings: Settings, dsn: str) -> dict[tuple[str, int], Pair]:
    """Seconds per step, engine and raw, for each backend and step count."""
    results: dict[tuple[str, int], Pair] = {}
    with sqlite_store() as store, ServingWorker(store) as worker:
        raw_path = store.engine.url.database  # the same database file, WAL and disk
        assert raw_path is not None
        raw.create_raw_sqlite_table(raw_path)
        for n in STEP_COUNTS:
            results["sqlite", n] = interleaved(
                functools.partial(engine_step_seconds, worker, store, n),
                functools.partial(raw.raw_sqlite_step_seconds, raw_path, n),
                settings.repeats,
            )
    with pg_store(dsn) as store, ServingWorker(store) as worker:
        for n in STEP_COUNTS:
            results["postgres", n] = interleaved(
                functools.partial(engine_step_seconds, worker, store, n),
                functools.partial(raw.raw_pg_step_seconds, dsn, n),
                settings.repeats,
            )
    return results


def concurrent(settings: Settings, dsn: str) -> Pair:
    """Total steps/s of 8 x 50 on PostgreSQL, engine and raw."""
    with pg_store(dsn) as store, ServingWorker(store, CONCURRENT_RUNS) as worker:
        return interleaved(
            functools.partial(
                engine_concurrent_steps_per_second, worker, store, CONCURRENT_RUNS, CONCURRENT_STEPS
            ),
            lambda: raw.raw_pg_concurrent_steps_per_second(dsn, CONCURRENT_RUNS, CONCURRENT_STEPS),
            settings.repeats,
        )


def journal_bytes(settings: Settings, dsn: str) -> Pair:
    """Bytes per trivial step on PostgreSQL, engine and raw (uuid key), 200 steps per run."""
    with pg_store(dsn) as store:
        engine = engine_bytes_per_step(store, settings.byte_rows, RESUME_STEPS)
    base = raw.raw_row_bytes_pg(dsn, settings.byte_rows, steps_per_run=RESUME_STEPS, key="uuid")
    return Pair(engine, base, engine / base)


def resume(settings: Settings, dsn: str) -> dict[str, ResumeCost]:
    """Median resume cost on each backend."""
    results: dict[str, ResumeCost] = {}
    stores: dict[str, Callable[[], contextlib.AbstractContextManager[TimedStore]]] = {
        "sqlite": sqlite_store,
        "postgres": lambda: pg_store(dsn),
    }
    for backend, open_store in stores.items():
        with open_store() as store:
            engine_resume_cost(store, RESUME_STEPS, RESUME_AT)  # warm-up
            costs = [
                engine_resume_cost(store, RESUME_STEPS, RESUME_AT) for _ in range(settings.repeats)
            ]
        results[backend] = ResumeCost(
            total=statistics.median(c.total for c in costs),
            replay=statistics.median(c.replay for c in costs),
        )
    return results


def peer_numbers(settings: Settings, dsn: str) -> dict[tuple[str, int], float | None]:
    """Seconds per step of every peer for every step count (None: not installed)."""
    functions: dict[str, Callable[[int], float | None]] = {
        "dbos/sqlite": lambda n: peers.dbos_sqlite_step_seconds(n, settings.peer_repeats),
        "dbos/postgres": lambda n: peers.dbos_pg_step_seconds(dsn, n, settings.peer_repeats),
        "langgraph/sqlite": lambda n: peers.langgraph_sqlite_step_seconds(n, settings.peer_repeats),
        "langgraph/postgres": lambda n: peers.langgraph_pg_step_seconds(
            dsn, n, settings.peer_repeats
        ),
    }
    return {(name, n): fn(n) for name, fn in functions.items() for n in STEP_COUNTS}


# ------------------------------------------------------------------------ reporting


def table(title: str, headers: list[str], rows: list[list[str]]) -> str:
    """Render an aligned text table: first column left, the others right."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) for c, w in zip(cells, widths, strict=True)]
        padded[0] = cells[0].ljust(widths[0])
        return "  ".join(padded)

    rule = "-" * len(line(headers))
    return "\n".join([title, rule, line(headers), rule, *map(line, rows), ""])


def verdict(ok: bool) -> str:
    """The text of a bar check."""
    return "ok" if ok else "MISSED"


def us(seconds: float) -> str:
    """Seconds as microseconds."""
    return f"{seconds * 1e6:,.0f}"


def per_second(seconds: float) -> str:
    """Seconds per step as steps per second."""
    return f"{1 / seconds:,.0f}"


def sequential_table(results: dict[tuple[str, int], Pair], repeats: int) -> str:
    """The sequential per-step table."""
    rows = []
    for (backend, n), pair in results.items():
        bar = verdict(pair.ratio <= STEP_BAR) if n == max(STEP_COUNTS) else ""
        rows.append(
            [
                backend,
                str(n),
                us(pair.engine),
                per_second(pair.engine),
                us(pair.raw),
                per_second(pair.raw),
                f"{pair.ratio:.2f}x",
                bar,
            ]
        )
    return table(
        f"Sequential demo.trivial, claim to completion (medians of {repeats} back-to-back "
        f"engine/raw pairs; engine/raw: median of the pairs' ratios); "
        f"bar: <= {STEP_BAR}x raw at {max(STEP_COUNTS)} steps",
        [
            "backend",
            "steps",
            "engine µs/step",
            "steps/s",
            "raw µs/step",
            "steps/s",
            "engine/raw",
            "bar",
        ],
        rows,
    )


def concurrent_table(pair: Pair, repeats: int) -> str:
    """The concurrent throughput table."""
    return table(
        f"PostgreSQL, {CONCURRENT_RUNS} concurrent runs x {CONCURRENT_STEPS} steps, one worker "
        f"(medians of {repeats} pairs, as above); bar: >= {CONCURRENT_BAR:.0%} of raw",
        ["", "engine steps/s", f"raw {CONCURRENT_RUNS} conns steps/s", "engine/raw", "bar"],
        [
            [
                "postgres",
                f"{pair.engine:,.0f}",
                f"{pair.raw:,.0f}",
                f"{pair.ratio:.0%}",
                verdict(pair.ratio >= CONCURRENT_BAR),
            ]
        ],
    )


def bytes_table(pair: Pair, rows: int) -> str:
    """The journal size table."""
    return table(
        f"PostgreSQL journal bytes per trivial step, pg_total_relation_size / rows "
        f"({rows:,} rows, {RESUME_STEPS} per run, uuid keys); bar: <= {BYTES_BAR}x raw",
        ["", "engine B/step", "raw B/row", "engine/raw", "bar"],
        [
            [
                "postgres",
                f"{pair.engine:.1f}",
                f"{pair.raw:.1f}",
                f"{pair.ratio:.2f}x",
                verdict(pair.ratio <= BYTES_BAR),
            ]
        ],
    )


def resume_table(results: dict[str, ResumeCost], repeats: int) -> str:
    """The resume cost table."""
    rows = [
        [
            backend,
            f"{cost.total * 1e3:.1f}",
            f"{cost.replay * 1e3:.1f}",
            verdict(cost.total * 1e3 < RESUME_BAR_MS),
        ]
        for backend, cost in results.items()
    ]
    return table(
        f"Resume of a {RESUME_STEPS}-step run released after {RESUME_AT} steps "
        f"(median of {repeats}); bar: < {RESUME_BAR_MS:.0f} ms",
        ["backend", "claim to first live write ms", "replay alone ms", "bar"],
        rows,
    )


def side_by_side_table(
    ours: dict[tuple[str, int], Pair], others: dict[tuple[str, int], float | None]
) -> str:
    """Signoff, raw and peers, µs per step for each step count."""
    lines: dict[str, dict[int, str]] = {}
    for (backend, n), pair in ours.items():
        lines.setdefault(f"signoff/{backend}", {})[n] = us(pair.engine)
    for (backend, n), pair in ours.items():
        lines.setdefault(f"raw/{backend}", {})[n] = us(pair.raw)
    for (name, n), seconds in others.items():
        lines.setdefault(name, {})[n] = "not installed" if seconds is None else us(seconds)
    return table(
        "µs per step, side by side (peers: workflow wall time / steps, bench.peers)",
        ["engine", *(f"{n} steps" for n in STEP_COUNTS)],
        [[name, *(by_n.get(n, "") for n in STEP_COUNTS)] for name, by_n in lines.items()],
    )


def main(argv: list[str] | None = None) -> None:
    """Run every measurement and print the tables."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.steps", description="Signoff's cost per journaled step."
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats and rows")
    parser.add_argument("--no-peers", action="store_true", help="skip DBOS and LangGraph")
    parser.add_argument(
        "--only",
        choices=["sequential", "concurrent", "bytes", "resume", "peers"],
        help="run one section only",
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    dsn = default_dsn()

    def wanted(section: str) -> bool:
        return args.only in (None, section)

    ours: dict[tuple[str, int], Pair] = {}
    if wanted("sequential") or wanted("peers"):
        ours = sequential(settings, dsn)
        print(sequential_table(ours, settings.repeats), flush=True)
    if wanted("concurrent"):
        print(concurrent_table(concurrent(settings, dsn), settings.repeats), flush=True)
    if wanted("bytes"):
        print(bytes_table(journal_bytes(settings, dsn), settings.byte_rows), flush=True)
    if wanted("resume"):
        print(resume_table(resume(settings, dsn), settings.repeats), flush=True)
    if wanted("peers") and not args.no_peers:
        print(side_by_side_table(ours, peer_numbers(settings, dsn)), flush=True)


if __name__ == "__main__":
    main()
