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
  same round trips (each statement alone, autocommit: what the engine does), sent the
  cheapest way a Python program can: on PostgreSQL each statement prepared once and run
  with libpq's own call, as the engine sends its journal entries.  For reference: the
  BEGIN/INSERT/COMMIT column (three round trips on PostgreSQL), and on PostgreSQL the
  same raw run sent through psycopg's ``Connection.execute`` (about 100 µs more client
  CPU a statement on this machine class: a raw baseline that went through it, as this
  one did before, flattered the engine).  And the raw run that first keeps the processor
  busy, at every step, for the CPU time the engine's process spends beyond the raw
  client's (measured just before, over whole runs): what the engine would take if its
  statements cost the database what the raw ones do, so the column beside the engine
  tells the client's share of the gap from the database's.  And the engine's statements
  alone (``bench.step_harness.StatementFloor``): the run's row, each fenced append with
  the entry the engine writes and the run's end, their parameters encoded before the
  clock starts, on one connection of the engine's: what any client of this schema would
  pay at the least.  The
  contestants take turns repeat by repeat, in rotating order; the ratio is the median
  of the per-repeat ratios, with its interquartile range.
* journal (the statement the hot path uses): µs per append of the fenced
  ``INSERT … SELECT`` as ``SqlStore`` runs it (on a driver connection: SQLite's cursor,
  PostgreSQL's libpq call) and through SQLAlchemy Core (``Connection.execute`` of the
  same statement, built once, on an autocommit connection), interleaved; on PostgreSQL
  also the statement on a driver connection's psycopg cursor beside Core.
* concurrent (PostgreSQL): total steps/s of 8 payload runs x 50 steps on one worker of
  concurrency 8, beside 8 raw connections each writing 50 rows, autocommit, through
  libpq's own call.
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
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from agent_runtime import Lease, Runtime, StepRecord
from bench import peers, raw
from bench._common import (
    Paired,
    default_dsn,
    interleave,
    table,
    take_turns,
)
from bench.step_harness import (
    APPENDS,
    BACKENDS,
    RESUME_AT,
    RESUME_STEPS,
    ResumeCost,
    ServingWorker,
    StatementFloor,
    TimedStore,
    append_seconds,
    core_appender,
    cursor_appender,
    engine_bytes_per_step,
    engine_concurrent_steps_per_second,
    engine_crash_resume,
    engine_step_seconds,
    pg_store,
    raw_beside,
    sent_whole,
)
from bench.workloads import WORKFLOW, step_output_json, workloads

STEP_COUNTS = (20, 200)
CONCURRENT_RUNS = 8
CONCURRENT_STEPS = 50
STEP_BAR = 1.2  # engine / same-round-trip raw, 200 payload steps
CONCURRENT_BAR = 0.5  # engine / raw throughput
BYTES_BAR = 1.5  # engine / raw bytes per step
RESUME_BAR_MS = 50.0


@dataclass(frozen=True, slots=True)
class Settings:
    """How long to measure."""

    repeats: int
    byte_rows: int
    resume_repeats: int
    peer_repeats: int


FULL = Settings(repeats=25, byte_rows=10_000, resume_repeats=9, peer_repeats=5)
QUICK = Settings(repeats=7, byte_rows=2_000, resume_repeats=3, peer_repeats=1)


# ----------------------------------------------------------------------- measuring


@dataclass(frozen=True, slots=True)
class Sequential:
    """Engine beside the same-round-trip raw run (paired), the BEGIN/COMMIT raw median, on
    PostgreSQL the median of the raw run sent through psycopg's ``Connection.execute``, and
    the median of the raw run that first spends, at every step, the CPU the engine's
    process spends beyond the raw client's (``extra_cpu``, seconds a step), and the
    engine's statements sent alone beside the raw run."""

    pair: Paired
    transactions: float
    psycopg: float | None
    extra_cpu: float
    with_extra_cpu: float
    alone: Paired
    """The engine's statements alone (``StatementFloor``) beside the raw run, paired."""


def sequential(settings: Settings, dsn: str) -> dict[tuple[str, int], Sequential]:
    """Seconds per step, engine and raw, for each backend and step count."""
    results: dict[tuple[str, int], Sequential] = {}
    for backend, open_store in BACKENDS.items():
        with (
            open_store(dsn) as store,
            ServingWorker(store) as worker,
            raw_beside(store, dsn) as (base, cursor),
            contextlib.closing(StatementFloor(store)) as alone,
        ):
            for n in STEP_COUNTS:
                results[backend, n] = _sequential(settings, worker, store, base, cursor, alone, n)
    return results


def _sequential(
    settings: Settings,
    worker: ServingWorker,
    store: TimedStore,
    base: raw.RawRuns,
    cursor: raw.RawRuns | None,
    alone: StatementFloor,
    n: int,
) -> Sequential:
    outputs = [step_output_json(index) for index in range(n)]

    def engine() -> float:
        return engine_step_seconds(worker, store, n)

    def raw_run() -> float:
        return base.run_step_seconds(outputs)

    extra = max(0.0, cpu_per_step(engine, n) - cpu_per_step(raw_run, n))
    turns: dict[str, Callable[[], float]] = {
        "engine": engine,
        "raw": raw_run,
        "transactions": lambda: base.run_step_seconds(outputs, transactions=True),
        "busy": lambda: base.run_step_seconds(outputs, busy=extra),
        "alone": lambda: alone.run_step_seconds(n),
    }
    if cursor is not None:
        turns["psycopg"] = lambda: cursor.run_step_seconds(outputs)
    samples = take_turns(turns, settings.repeats)
    pairs = tuple(zip(samples["engine"], samples["raw"], strict=True))
    through_psycopg = statistics.median(samples["psycopg"]) if cursor is not None else None
    return Sequential(
        Paired(pairs),
        statistics.median(samples["transactions"]),
        through_psycopg,
        extra,
        statistics.median(samples["busy"]),
        Paired(tuple(zip(samples["alone"], samples["raw"], strict=True))),
    )


def cpu_per_step(run: Callable[[], float], steps: int, times: int = 5) -> float:
    """The median CPU time of this process (all its threads: the engine's worker too) per
    step of ``run``, over ``times`` runs."""
    spent = []
    for _ in range(times):
        start = time.process_time()
        run()
        spent.append((time.process_time() - start) / steps)
    return statistics.median(spent)


def journal(settings: Settings, dsn: str) -> dict[str, tuple[Paired, Paired]]:
    """Per append, wall and client CPU: SQLAlchemy Core (the pairs' first) beside the
    store's path on each backend, and on PostgreSQL beside the same statement on a
    driver connection's psycopg cursor (the path libpq's own call replaced) and sent whole
    each time (behind a transaction pooler, ``pooling=transaction``)."""
    results: dict[str, tuple[Paired, Paired]] = {}
    for backend, open_store in BACKENDS.items():
        with open_store(dsn) as store, contextlib.ExitStack() as later:
            ways: dict[str, Callable[[Lease, StepRecord], object]] = {backend: store.append_step}
            if backend == "postgres":
                ways["postgres, psycopg cursor"] = cursor_appender(store)
                whole = later.enter_context(sent_whole(store))
                ways["postgres, sent whole (pooling=transaction)"] = whole.append_step
            for name, append in ways.items():
                results[name] = (
                    _journal(settings, store, append, time.perf_counter),
                    _journal(settings, store, append, time.thread_time),
                )
    return results


def _journal(
    settings: Settings,
    store: TimedStore,
    append: Callable[[Lease, StepRecord], object],
    clock: Callable[[], float],
) -> Paired:
    runtime = Runtime(store, workloads())
    runtime.start(WORKFLOW, {"n": 1})
    now = runtime.clock.now()
    ((_, lease),) = store.claim_runs("bench", limit=1, now=now, expires_at=now + timedelta(hours=1))
    positions = iter(range(0, 10**9, APPENDS))
    core = core_appender(store)
    return interleave(
        lambda: append_seconds(core, lease, next(positions), clock),
        lambda: append_seconds(append, lease, next(positions), clock),
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
                dsn,
                CONCURRENT_RUNS,
                CONCURRENT_STEPS,
                output=step_output_json(0),
                autocommit=True,
                driver="libpq",
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
                "" if result.psycopg is None else us(result.psycopg),
                us(result.extra_cpu),
                us(result.with_extra_cpu),
                us(result.alone.engine),
                f"{result.alone.ratio:.2f}x",
                spread(result.alone),
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
            "raw via psycopg µs/step",
            "engine's extra CPU µs/step",
            "raw + that CPU µs/step",
            "engine's statements alone µs/step",
            "alone/raw",
            "IQR",
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
        "wall and CPU time): the store's path beside SQLAlchemy Core's "
        "Connection.execute of the same statement",
        [
            "backend",
            "store µs",
            "Core µs",
            "Core/store",
            "IQR",
            "store CPU µs",
            "Core CPU µs",
            "Core/store CPU",
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
