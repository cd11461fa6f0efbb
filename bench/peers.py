"""Peer engines running the same workload: one workflow of N trivial sequential steps.

* DBOS Transact (``dbos``): ``@DBOS.workflow`` calling a ``@DBOS.step`` that returns
  ``None`` N times, on its SQLite system database and on PostgreSQL.
* LangGraph (``langgraph`` + ``langgraph-checkpoint-sqlite`` / ``-postgres``): a
  ``StateGraph`` of N trivial nodes in a chain, compiled with ``SqliteSaver`` or
  ``PostgresSaver`` and run with ``durability="sync"`` so that every step's
  checkpoint is persisted before the next step starts (the default, ``"async"``,
  overlaps the write with the next step; ``"exit"`` writes only at the end).

Every function returns seconds per step (workflow wall time / N, so the per-run
overhead of starting and finishing the workflow is spread over its steps), taken as
the median of ``repeats`` runs after one untimed warm-up run; engine start-up and
schema creation are not timed.  A function returns ``None`` when its optional
packages are not installed.  Each one cleans up: SQLite files live in a temporary
directory, PostgreSQL objects in a fresh schema that is dropped afterwards.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypedDict

import psycopg
from psycopg import sql

from bench._common import (
    create_schema,
    default_dsn,
    drop_schema,
    fresh_name,
    median_per_step,
    sqlalchemy_pg_url,
)

STEP_COUNTS: tuple[int, ...] = (20, 200)
DEFAULT_REPEATS = 3

# ----------------------------------------------------------------------------- DBOS


def dbos_sqlite_step_seconds(steps: int, repeats: int = DEFAULT_REPEATS) -> float | None:
    """DBOS on its SQLite system database (a file in a temporary directory).

    DBOS's SQLite engine keeps SQLite's defaults (rollback journal, not WAL;
    ``synchronous=FULL``) and uses ``BEGIN IMMEDIATE`` transactions.
    """
    with tempfile.TemporaryDirectory(prefix="signoff-bench-dbos-") as tmp:
        url = "sqlite:///" + os.path.join(tmp, "dbos_sys.sqlite")
        return _dbos_step_seconds(url, None, steps, repeats)


def dbos_pg_step_seconds(dsn: str, steps: int, repeats: int = DEFAULT_REPEATS) -> float | None:
    """DBOS on PostgreSQL, its system tables in a fresh schema (dropped afterwards)."""
    schema = fresh_name("bench_dbos")
    try:
        return _dbos_step_seconds(sqlalchemy_pg_url(dsn), schema, steps, repeats)
    finally:
        drop_schema(dsn, schema)


def _dbos_step_seconds(
    system_database_url: str, schema: str | None, steps: int, repeats: int
) -> float | None:
    try:
        import dbos._dbos as dbos_internal
        from dbos import DBOS, DBOSConfig
    except ImportError:
        return None
    if getattr(dbos_internal, "_dbos_global_instance", None) is not None:
        raise RuntimeError(
            "a DBOS instance already exists in this process; the bench needs its own"
        )

    # DBOS is a process-wide singleton: register, launch, measure, then destroy the
    # instance and its registry so the next call (e.g. another backend) starts clean.
    @DBOS.step()
    def bench_noop_step() -> None:
        return None

    @DBOS.workflow()
    def bench_chain(n: int) -> int:
        for _ in range(n):
            bench_noop_step()
        return n

    config: DBOSConfig = {
        "name": "signoff-bench",
        "system_database_url": system_database_url,
        "log_level": "WARNING",
        "application_version": "signoff-bench",
    }
    if schema is not None:
        config["dbos_system_schema"] = schema
    try:
        DBOS(config=config)
        DBOS.launch()

        def one_run() -> float:
            start = time.perf_counter()
            done = bench_chain(steps)
            elapsed = time.perf_counter() - start
            if done != steps:
                raise RuntimeError(f"DBOS workflow returned {done}, expected {steps}")
            return elapsed

        one_run()  # warm-up
        return median_per_step(one_run, steps, repeats)
    finally:
        DBOS.destroy(destroy_registry=True)


# ------------------------------------------------------------------------ LangGraph

Durability = Literal["sync", "async", "exit"]


class _ChainState(TypedDict):
    i: int


def _chain_node(state: _ChainState) -> dict[str, int]:
    return {"i": state["i"] + 1}


def _run_langgraph_chain(
    checkpointer: Any, steps: int, repeats: int, durability: Durability
) -> float:
    """Build an N-node chain on ``checkpointer`` and time it (median s/step)."""
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(_ChainState)
    names = [f"step_{k}" for k in range(steps)]
    for name in names:
        builder.add_node(name, _chain_node)
    builder.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        builder.add_edge(a, b)
    builder.add_edge(names[-1], END)
    graph = builder.compile(checkpointer=checkpointer)

    def one_run() -> float:
        config: Any = {
            "configurable": {"thread_id": str(uuid.uuid4())},
            "recursion_limit": steps + 10,
        }
        start = time.perf_counter()
        result = graph.invoke({"i": 0}, config, durability=durability)
        elapsed = time.perf_counter() - start
        if result["i"] != steps:
            raise RuntimeError(f"LangGraph chain ran {result['i']} steps, expected {steps}")
        return elapsed

    one_run()  # warm-up
    return median_per_step(one_run, steps, repeats)


def langgraph_sqlite_step_seconds(
    steps: int, repeats: int = DEFAULT_REPEATS, durability: Durability = "sync"
) -> float | None:
    """LangGraph chain with ``SqliteSaver`` (WAL, as its ``setup()`` sets it) on a file
    in a temporary directory."""
    if steps < 1:
        raise ValueError("steps must be >= 1")
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        return None
    with tempfile.TemporaryDirectory(prefix="signoff-bench-lg-") as tmp:
        conn = sqlite3.connect(os.path.join(tmp, "checkpoints.sqlite"), check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            return _run_langgraph_chain(saver, steps, repeats, durability)
        finally:
            conn.close()


@contextmanager
def _pg_saver_connection(dsn: str, schema: str) -> Iterator[psycopg.Connection[Any]]:
    from psycopg.rows import dict_row

    # PostgresSaver needs autocommit and dict rows; its tables are unqualified, so
    # point search_path at the fresh schema.
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield conn


def langgraph_pg_step_seconds(
    dsn: str, steps: int, repeats: int = DEFAULT_REPEATS, durability: Durability = "sync"
) -> float | None:
    """LangGraph chain with ``PostgresSaver`` in a fresh schema (dropped afterwards)."""
    if steps < 1:
        raise ValueError("steps must be >= 1")
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        return None
    schema = fresh_name("bench_lg")
    create_schema(dsn, schema)
    try:
        with _pg_saver_connection(dsn, schema) as conn:
            saver = PostgresSaver(conn)
            saver.setup()
            return _run_langgraph_chain(saver, steps, repeats, durability)
    finally:
        drop_schema(dsn, schema)


# ------------------------------------------------------------------------- runner

PeerFn = Callable[[str, int], float | None]

PEERS: dict[str, PeerFn] = {
    "dbos/sqlite": lambda dsn, n: dbos_sqlite_step_seconds(n),
    "dbos/postgres": dbos_pg_step_seconds,
    "langgraph/sqlite": lambda dsn, n: langgraph_sqlite_step_seconds(n),
    "langgraph/postgres": langgraph_pg_step_seconds,
}


def run_peers(
    dsn: str, step_counts: tuple[int, ...] = STEP_COUNTS
) -> dict[tuple[str, int], float | None]:
    """Run every peer for every N; ``None`` marks a peer whose package is missing."""
    return {(name, n): fn(dsn, n) for name, fn in PEERS.items() for n in step_counts}


def format_result(seconds: float | None) -> str:
    return "not installed" if seconds is None else f"{seconds * 1e3:8.3f} ms/step"


def main() -> None:
    dsn = default_dsn()
    for (name, n), seconds in run_peers(dsn).items():
        print(f"{name:<20} N={n:<4} {format_result(seconds)}")


if __name__ == "__main__":
    main()
