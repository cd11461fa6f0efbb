"""Throughput of many short runs on PostgreSQL, beside the raw limit of the same protocol.

Run ``python -m bench.throughput`` (``--quick`` for fewer runs and one pair).  For 1 and
10 steps per run, ``RUNS`` pending ``bench.payload`` runs are seeded into the engine's
tables (a fresh schema), then ``PROCESSES`` processes execute them all:

* engine: each process runs a ``Worker`` of concurrency ``THREADS`` on a ``SqlStore``.
* raw: each process runs ``THREADS`` threads, each on its own autocommit connection,
  doing the engine's protocol with hand-written SQL, each statement prepared once and
  sent through libpq's own call (as the engine sends its journal entries), and nothing
  else: claim
  one due run (``FOR UPDATE SKIP LOCKED``), read its journal unless it is the run's first
  claim, append each step with the fenced ``INSERT … SELECT`` (the same 226-byte
  output), complete it under its fence.

Runs per second are timed from the moment every process is ready (imports, connections
made) to the last completion.  Engine and raw alternate pair by pair (which goes first
alternates too); the table gives medians, engine/raw as the median of the pairs' ratios
and its range.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Barrier
from typing import Any

import psycopg

from agent_runtime import Worker, WorkerOptions
from bench._common import (
    Paired,
    create_schema,
    default_dsn,
    drop_schema,
    fresh_name,
    interleave,
    sqlalchemy_pg_url,
    table,
)
from bench.raw import LibpqStatements
from bench.workloads import WORKFLOW, step_output_json, workloads
from store import build_engine, upgrade
from store.sql_store import SqlStore

PROCESSES = 4
THREADS = 4
STEP_COUNTS = (1, 10)
BAR = 0.70
READY_TIMEOUT_S = 120


@dataclass(frozen=True, slots=True)
class Settings:
    """How much to measure."""

    runs: int
    repeats: int


FULL = Settings(runs=10_000, repeats=3)
QUICK = Settings(runs=2_000, repeats=1)


# --------------------------------------------------------------------------- database


@dataclass(frozen=True, slots=True)
class Database:
    """A fresh schema holding the engine's tables, reachable by psycopg and SQLAlchemy."""

    dsn: str
    schema: str

    @property
    def options(self) -> str:
        """The libpq ``options`` that select the schema."""
        return f"-csearch_path={self.schema}"

    @property
    def url(self) -> str:
        """A SQLAlchemy URL for the schema."""
        return sqlalchemy_pg_url(self.dsn) + f"?options={self.options.replace('=', '%3D')}"

    def connect(self) -> psycopg.Connection[Any]:
        """An autocommit connection to the schema."""
        return psycopg.connect(self.dsn, autocommit=True, options=self.options)


def migrated(dsn: str) -> Database:
    """Create a schema and upgrade it to the engine's tables."""
    database = Database(dsn, fresh_name("bench_throughput"))
    create_schema(dsn, database.schema)
    engine = build_engine(database.url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return database


def seed(database: Database, runs: int, steps: int) -> None:
    """Empty the tables and add ``runs`` pending ``bench.payload`` runs, due now."""
    now = datetime.now(UTC)
    rows = [(uuid.uuid4(), WORKFLOW, json.dumps({"n": steps}), now, now, now) for _ in range(runs)]
    with database.connect() as conn:
        conn.execute("TRUNCATE runs, steps CASCADE")  # the journal has no key to runs
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO runs (id, workflow, status, input, created_at, updated_at, due_at,"
                " fence) VALUES (%s, %s, 'pending', %s::jsonb, %s, %s, %s, 0)",
                rows,
            )
        conn.execute("VACUUM ANALYZE runs")


def check_done(database: Database, runs: int, steps: int) -> datetime:
    """Raise unless every run completed with its steps; return the last completion time."""
    with database.connect() as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'completed'), max(updated_at) FROM runs"
        ).fetchone()
        entries = conn.execute("SELECT count(*) FROM steps").fetchone()
    assert row is not None
    assert entries is not None
    if row[0] != runs or entries[0] != runs * steps:
        raise RuntimeError(f"{row[0]} of {runs} runs completed, {entries[0]} entries")
    last: datetime = row[1]
    return last


# ------------------------------------------------------------------------- processes


def engine_process(url: str, barrier: Barrier) -> None:
    """A worker process: connect, wait for the start, execute runs until none is left."""
    engine = build_engine(url)
    store = SqlStore(engine)
    options = WorkerOptions(concurrency=THREADS, poll_interval=timedelta(milliseconds=50))
    worker = Worker(store, workloads(), options=options)
    store.next_due()  # connect before the clock starts
    barrier.wait(READY_TIMEOUT_S)
    worker.run(until_idle=True)
    engine.dispose()


CLAIM = (
    "UPDATE runs SET status = 'running', lease_owner = ?, fence = fence + 1,"
    " due_at = ?, updated_at = ?"
    " WHERE id IN (SELECT id FROM runs WHERE due_at <= ? ORDER BY due_at LIMIT 1"
    " FOR UPDATE SKIP LOCKED) RETURNING id, fence, input"
)
JOURNAL = "SELECT * FROM steps WHERE run_id = ? ORDER BY position"
APPEND = (
    "INSERT INTO steps (run_id, position, kind, name, input_hash, output, error, attempts,"
    " started_at, finished_at) SELECT id, ?, 'step', ?, 'h', ?::jsonb, NULL, 1, ?, ?"
    " FROM runs WHERE id = ? AND fence = ? AND status = 'running' FOR SHARE"
)
COMPLETE = (
    "UPDATE runs SET status = 'completed', output = ?::jsonb, lease_owner = NULL,"
    " due_at = NULL, wait_key = NULL, updated_at = ?"
    " WHERE id = ? AND fence = ? AND status = 'running'"
)


def raw_thread(database: Database, ready: threading.Barrier) -> None:
    """Claim, load, append and complete runs one by one until none is due, each statement
    prepared once and run with libpq's own call (``bench.raw.LibpqStatements``)."""
    outputs = [step_output_json(index) for index in range(max(STEP_COUNTS))]
    with database.connect() as conn:
        sql = LibpqStatements(conn)
        ready.wait(READY_TIMEOUT_S)
        while True:
            now = datetime.now(UTC)
            claimed = sql.execute(CLAIM, ("raw", now + timedelta(seconds=3), now, now))
            if not claimed.ntuples:
                return
            run_id, fence = claimed.get_value(0, 0).decode(), int(claimed.get_value(0, 1))
            steps = json.loads(claimed.get_value(0, 2))["n"]
            if fence > 1:  # as the engine: a first claim finds an empty journal
                sql.execute(JOURNAL, (run_id,))
            for index in range(steps):
                at = datetime.now(UTC)
                appended = sql.execute(
                    APPEND, (index, f"step {index}", outputs[index], at, at, run_id, fence)
                )
                assert appended.command_tuples == 1
            done = (json.dumps({"steps": steps}), datetime.now(UTC), run_id, fence)
            assert sql.execute(COMPLETE, done).command_tuples == 1


def raw_process(database: Database, barrier: Barrier) -> None:
    """A raw process: ``THREADS`` threads, started together once every process is ready."""
    ready = threading.Barrier(THREADS + 1)
    threads = [threading.Thread(target=raw_thread, args=(database, ready)) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    ready.wait(READY_TIMEOUT_S)
    barrier.wait(READY_TIMEOUT_S)
    for thread in threads:
        thread.join()


def runs_per_second(
    database: Database, settings: Settings, steps: int, target: Callable[..., None], arg: Any
) -> float:
    """Seed, start ``PROCESSES`` processes running ``target(arg, barrier)``, time them."""
    seed(database, settings.runs, steps)
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(PROCESSES + 1)
    processes = [spawn.Process(target=target, args=(arg, barrier)) for _ in range(PROCESSES)]
    for process in processes:
        process.start()
    barrier.wait(READY_TIMEOUT_S)
    started = datetime.now(UTC)
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise RuntimeError(f"a benchmark process exited with {process.exitcode}")
    elapsed = (check_done(database, settings.runs, steps) - started).total_seconds()
    return settings.runs / elapsed


def measure(settings: Settings, dsn: str, steps: int) -> Paired:
    """Engine and raw runs/s for ``steps`` steps per run, interleaved."""
    database = migrated(dsn)
    try:
        return interleave(
            lambda: runs_per_second(database, settings, steps, engine_process, database.url),
            lambda: runs_per_second(database, settings, steps, raw_process, database),
            settings.repeats,
            warmup=False,
        )
    finally:
        drop_schema(dsn, database.schema)


def report(results: dict[int, Paired], settings: Settings) -> str:
    """The throughput table."""
    rows = [
        [
            f"{settings.runs:,} runs x {steps} step{'s' if steps > 1 else ''}",
            f"{pair.engine:,.0f}",
            f"{pair.base:,.0f}",
            f"{pair.ratio:.0%}",
            f"{pair.low:.0%}-{pair.high:.0%}",
            "ok" if pair.ratio >= BAR else "MISSED",
        ]
        for steps, pair in results.items()
    ]
    return table(
        f"PostgreSQL, {PROCESSES} processes x {THREADS} threads, runs/s from all ready to last "
        f"completion ({settings.repeats} interleaved pairs); bar: engine >= {BAR:.0%} of raw",
        ["workload", "engine runs/s", "raw runs/s", "engine/raw", "range", "bar"],
        rows,
    )


def main(argv: list[str] | None = None) -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK.runs:,} runs, one pair")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    dsn = default_dsn()
    results = {steps: measure(settings, dsn, steps) for steps in STEP_COUNTS}
    print(report(results, settings), flush=True)


if __name__ == "__main__":
    main()
