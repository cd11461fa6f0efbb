"""Decisions per second: ``Approvals.decide`` beside the raw SQL it must run, on PostgreSQL
and SQLite.

Run ``python -m bench.decisions`` (``--quick`` for fewer decisions per repeat).

Set-up, torn down at the end: a fresh PostgreSQL database on ``SIGNOFF_BENCH_PG_URL`` (default:
the local server, as the other benchmarks) and a SQLite file, migrated. Before each repeat:
runs started from a Slack channel, each with one pending approval of a gated tool (two
approvers, one needed) exactly as the agent loop asks for them, so each decision writes
what a click's does: the compare-and-set on the approval, its audit entry (chained in its
run's shard, and signed with an audit key), the card updates and thread reply for the
outbox, and the wake-up event for the run; then the planner's statistics refreshed
(``ANALYZE``, as autovacuum keeps them in a deployment, for the raw baselines too: on a
server with autovacuum off, the planner would take the growing tables for empty ones and
read each whole where an index finds a row).

For 1, 8 and 32 deciding threads, repeat by repeat and interleaved (the order rotating), it
times ``decide`` (each thread takes the next approval and calls ``Approvals.decide``, which
reads the approval, judges it and saves it, as a click's listener does; the store saves
the decisions of threads deciding at the same time in one transaction, see
``store.approval_saves``) and the raw limits
of ``bench.decision_raw``: the same transaction's statements chained through the shard's
head row (``raw``), through one head row for every decision (``raw, one head``: the limit
before chains were sharded) and unchained.

It prints the median decisions/s of each with the spread (lowest-highest repeat), and the
median with the spread of decide/raw taken pair by pair, and how many decisions ``decide``
saved per transaction and the deciding process's CPU time per decision (medians of the
repeats), against the goal of 1,000 decisions/s with 8 deciders on PostgreSQL. The row of 32
deciders shows what larger batches do: with N deciders each deciding in turn, a batch holds
about N/2 of them (the callers of one batch come back together and gather behind the next),
and a batch's fixed cost is shared by more decisions. Numbers move with the machine's load: rerun
before concluding.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from agent_runtime import (
    Actor,
    ApprovalPolicy,
    Approvals,
    Decision,
    RunContext,
    Runtime,
    SystemClock,
    ToolLookup,
    Workflows,
    tool,
)
from agent_runtime.audit_keys import AuditKey, AuditKeys
from bench._common import scratch_database, sqlalchemy_pg_url, take_turns
from bench.decision_raw import Chaining, RawDecisions
from bot.slack.notifier import SlackNotifier
from store import open_store
from store.approval_store import SqlApprovalStore

APPROVERS = ("U_DANA", "U_OMAR")
THREADS = (1, 8, 32)
GOAL = 1_000
GOAL_DECIDERS = 8
"""Decisions per second ``decide`` should reach with ``GOAL_DECIDERS`` deciders."""


def refund(order_id: str, amount_cents: int) -> str:
    """Refund an order (never called: the benchmark only decides).

    Args:
        order_id: The order.
        amount_cents: How much.
    """
    return f"{order_id}:{amount_cents}"


POLICY = ApprovalPolicy(approvers=APPROVERS, deadline=timedelta(hours=1))
GATED = tool(side_effect=True, approval=POLICY)(refund)


@dataclass
class Bench:
    """A migrated database and the approvals service over it."""

    approvals: Approvals
    runtime: Runtime
    per_batch: dict[int, list[float]] = field(default_factory=dict)
    """Decisions saved per transaction, repeat by repeat, by number of deciders."""
    cpu: dict[int, list[float]] = field(default_factory=dict)
    """This process's CPU time per decision (ms), repeat by repeat, by number of deciders."""

    def dispose(self) -> None:
        """Close the database's connections."""
        self.runtime.store.engine.dispose()  # type: ignore[attr-defined]

    def pending(self, count: int) -> list[str]:
        """Start ``count`` runs, each with one pending approval; return the approval ids."""
        ids: list[str] = []
        now = SystemClock().now()
        for _ in range(count):
            run = self.runtime.start(
                "bench.idle",
                {
                    "task": "refund",
                    "context": {"slack": {"channel": "C_BENCH", "team": "T_BENCH"}},
                    "requester": {"user_id": "U_RITA"},
                },
            )
            ids.append(
                self.approvals.request(
                    run_id=run.id,
                    position=1,
                    tool=GATED,
                    args={"order_id": "1042", "amount_cents": 4999},
                    policy=POLICY.snapshot({}),
                    requester=Actor(user_id="U_RITA"),
                    now=now,
                ).id
            )
        self.analyze()
        return ids

    def analyze(self) -> None:
        """Refresh the planner's statistics, as autovacuum keeps them in a deployment (a
        server with autovacuum off would otherwise plan on tables it thinks empty, and
        read a whole table where an index finds a row)."""
        engine = self.runtime.store.engine  # type: ignore[attr-defined]
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")


def idle(context: RunContext, data: Any) -> None:
    """A workflow that is never run: the runs only carry the approvals."""


def pg_url(dsn: str) -> str:
    """The SQLAlchemy URL of the PostgreSQL database at ``dsn``."""
    return sqlalchemy_pg_url(dsn).replace("postgresql://", "postgresql+psycopg://")


def open_bench(url: str) -> Bench:
    """Migrate the database at ``url`` and wire the approvals service as ``serve`` does."""
    store = open_store(url)
    keys = AuditKeys((AuditKey("bench", b"b" * 32),))
    lookup = ToolLookup()
    lookup.add(GATED)
    approvals = Approvals(
        SqlApprovalStore(store.engine, audit_keys=keys), SystemClock(), lookup, SlackNotifier(store)
    )
    workflows = Workflows()
    workflows.add("bench.idle", idle)
    return Bench(
        approvals=approvals,
        runtime=Runtime(store, workflows, notifier=SlackNotifier(store)),
    )


def in_threads(items: list[str], threads: int, decide_one: Callable[[str], Any]) -> float:
    """Decide every item with ``threads`` threads; return decisions per second."""
    queue = list(items)
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)

    def work() -> None:
        start.wait()
        while True:
            with lock:
                if not queue:
                    return
                item = queue.pop()
            decide_one(item)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for thread in pool:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in pool:
        thread.join()
    return len(items) / (time.perf_counter() - began)


def decide_rate(bench: Bench, count: int, threads: int) -> float:
    """Decisions/s of ``Approvals.decide`` with ``threads`` deciders (recording how many
    were saved per transaction in ``bench.per_batch``)."""
    ids = bench.pending(count)
    dana = Actor(user_id="U_DANA", name="dana")
    store = bench.approvals.store
    assert isinstance(store, SqlApprovalStore)
    batches, saves = store.save_batches

    def one(approval: str) -> None:
        assert bench.approvals.decide(approval, dana, Decision.APPROVE).accepted

    began = time.process_time()
    rate = in_threads(ids, threads, one)
    cpu = time.process_time() - began
    after = store.save_batches
    bench.per_batch.setdefault(threads, []).append((after[1] - saves) / (after[0] - batches))
    bench.cpu.setdefault(threads, []).append(cpu / count * 1000)
    return rate


def raw_rate(raw: RawDecisions, count: int, threads: int, chaining: Chaining) -> float:
    """Decisions/s of the raw statements, one connection per thread."""
    ids = raw.pending(count)
    try:
        return in_threads(ids, threads, lambda approval: raw.decide(approval, chaining))
    finally:
        raw.close()


def spread(rates: list[float]) -> str:
    """The median rate and the lowest-highest repeat."""
    return f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"


def ratio(decided: list[float], raw: list[float]) -> str:
    """The median of decide/raw, pair by pair, with its lowest-highest pair."""
    pairs = [d / r for d, r in zip(decided, raw, strict=True)]
    return f"{statistics.median(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f})"


def measure(
    bench: Bench, raw: RawDecisions, variants: dict[str, Chaining], count: int, repeats: int
) -> list[list[str]]:
    """The table's rows for one database: every contestant, interleaved, per deciders."""
    return [_row(bench, raw, variants, count, repeats, threads) for threads in THREADS]


def _row(
    bench: Bench,
    raw: RawDecisions,
    variants: dict[str, Chaining],
    count: int,
    repeats: int,
    threads: int,
) -> list[str]:
    def raw_with(chaining: Chaining) -> Callable[[], float]:
        return lambda: raw_rate(raw, count, threads, chaining)

    contestants = {
        "decide": lambda: decide_rate(bench, count, threads),
        **{name: raw_with(chaining) for name, chaining in variants.items()},
    }
    rates = take_turns(contestants, repeats)
    spreads = [spread(rates[name]) for name in contestants]
    batches = statistics.median(bench.per_batch[threads])
    cpu = statistics.median(bench.cpu[threads])
    return [
        str(threads),
        *spreads,
        ratio(rates["decide"], rates["raw"]),
        f"{batches:.1f}",
        f"{cpu:.2f}",
    ]


PG_VARIANTS: dict[str, Chaining] = {
    "raw": "sharded",
    "raw, one head": "one head",
    "raw, no chain": "none",
}
SQLITE_VARIANTS: dict[str, Chaining] = {"raw": "sharded"}


def main() -> None:
    """Measure and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer decisions per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=("postgresql", "sqlite"), help="one database only")
    options = parser.parse_args()
    count = 200 if options.quick else 1000
    print(f"{count} decisions a repeat, median (lowest-highest) of {options.repeats} repeats")
    if options.only != "sqlite":
        with scratch_database() as dsn:
            bench = open_bench(pg_url(dsn))
            rows = measure(bench, RawDecisions(dsn=dsn), PG_VARIANTS, count, options.repeats)
            bench.dispose()
        _print("PostgreSQL", PG_VARIANTS, rows)
        row = rows[THREADS.index(GOAL_DECIDERS)]
        reached = float(row[1].split()[0].replace(",", ""))
        verdict = "met" if reached >= GOAL else "not met"
        print(f"goal: {GOAL:,} decisions/s with {GOAL_DECIDERS} deciders on PostgreSQL: {verdict}")
    if options.only != "postgresql":
        with tempfile.TemporaryDirectory() as scratch:
            path = str(Path(scratch) / "signoff.db")
            bench = open_bench(f"sqlite:///{path}")
            raw = RawDecisions(path=str(Path(scratch) / "raw.db"))
            rows = measure(bench, raw, SQLITE_VARIANTS, count, options.repeats)
            bench.dispose()
        _print("SQLite", SQLITE_VARIANTS, rows)


def _print(database: str, variants: dict[str, Chaining], rows: list[list[str]]) -> None:
    headers = [
        "deciders",
        "decide/s",
        *(f"{name}/s" for name in variants),
        "decide/raw",
        "decisions a transaction",
        "client CPU ms a decision",
    ]
    print(f"\n{database}")
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
