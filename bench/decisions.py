"""Decisions per second on PostgreSQL: ``Approvals.decide`` beside the raw SQL it must run.

Run ``python -m bench.decisions`` (``--quick`` for fewer decisions per repeat).

Set-up, torn down at the end: a fresh PostgreSQL database on ``SIGNOFF_BENCH_PG_URL`` (default:
the local server, as the other benchmarks), migrated; runs started from a Slack channel, each
with one pending approval of a gated tool (two approvers, one needed), exactly as the agent
loop asks for them, so each decision writes what a click's does: the compare-and-set on the
approval, its audit entry (chained, and signed with an audit key), the card updates and
thread reply for the outbox, and the wake-up event for the run.

For 1 and 8 deciding threads, repeat by repeat and interleaved, it times:

* ``decide``: each thread takes the next approval and calls ``Approvals.decide`` (which reads
  the approval, judges it and saves it, as a click's listener does);
* ``raw``: the physical limit on the same machine and server — one connection per thread, each
  decision one transaction of the statements a decision cannot do without: the approval's
  compare-and-set UPDATE, the audit head's row lock, the audit INSERT and the head UPDATE;
* ``raw, no chain``: the compare-and-set UPDATE and the audit INSERT alone, what the same
  transactions could do if audit entries were not chained through one head row.

It prints the median decisions/s of each with the spread (lowest-highest repeat) and the
ratio of the medians, against the goal of 1,000 decisions/s with 8 deciders. Numbers move
with the machine's load: rerun before concluding.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql

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
from bench._common import scratch_database, sqlalchemy_pg_url
from bot.slack.notifier import SlackNotifier
from store import open_store
from store.approval_store import SqlApprovalStore

APPROVERS = ("U_DANA", "U_OMAR")
THREADS = (1, 8)
GOAL = 1_000
"""Decisions per second ``decide`` should reach with 8 deciders."""


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
    """A migrated database, the approvals service over it, and a raw connection string."""

    dsn: str
    approvals: Approvals
    runtime: Runtime

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
        return ids


def idle(context: RunContext, data: Any) -> None:
    """A workflow that is never run: the runs only carry the approvals."""


def open_bench(dsn: str) -> Bench:
    """Migrate the database at ``dsn`` and wire the approvals service as ``serve`` does."""
    store = open_store(sqlalchemy_pg_url(dsn).replace("postgresql://", "postgresql+psycopg://"))
    keys = AuditKeys((AuditKey("bench", b"b" * 32),))
    lookup = ToolLookup()
    lookup.add(GATED)
    approvals = Approvals(
        SqlApprovalStore(store.engine, audit_keys=keys), SystemClock(), lookup, SlackNotifier(store)
    )
    workflows = Workflows()
    workflows.add("bench.idle", idle)
    return Bench(
        dsn=dsn,
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
    """Decisions/s of ``Approvals.decide`` with ``threads`` deciders."""
    ids = bench.pending(count)
    dana = Actor(user_id="U_DANA", name="dana")

    def one(approval: str) -> None:
        assert bench.approvals.decide(approval, dana, Decision.APPROVE).accepted

    return in_threads(ids, threads, one)


RAW = [
    "UPDATE raw_approvals SET status = 'approved', version = version + 1 "
    "WHERE id = %s AND version = 0",
    "SELECT seq, hash FROM raw_head WHERE id = 1 FOR UPDATE",
    "INSERT INTO raw_audit (seq, approval_id, detail, prev_hash, hash) "
    "VALUES ((SELECT seq + 1 FROM raw_head WHERE id = 1), %s, %s, 'p', 'h')",
    "UPDATE raw_head SET seq = seq + 1, hash = 'h' WHERE id = 1",
]


UNCHAINED = (
    "INSERT INTO raw_entries (approval_id, detail, prev_hash, hash) VALUES (%s, %s, 'p', 'h')"
)


def raw_rate(dsn: str, count: int, threads: int, *, chained: bool = True) -> float:
    """Decisions/s of the raw statements, one connection per thread (without the audit head
    row unless ``chained``)."""
    ids = [uuid.uuid4().hex[:24] for _ in range(count)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO raw_approvals (id, status, version) "
                "SELECT unnest(%s::text[]), 'pending', 0"
            ),
            (ids,),
        )
    local = threading.local()
    connections: list[psycopg.Connection[Any]] = []

    def one(approval: str) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = psycopg.connect(dsn)
            connections.append(conn)
        with conn.transaction():
            assert conn.execute(RAW[0], (approval,)).rowcount == 1
            if not chained:
                conn.execute(UNCHAINED, (approval, '{"decision": "approve"}'))
                return
            conn.execute(RAW[1])
            conn.execute(RAW[2], (approval, '{"decision": "approve"}'))
            conn.execute(RAW[3])

    try:
        return in_threads(ids, threads, one)
    finally:
        for conn in connections:
            conn.close()


def spread(rates: list[float]) -> str:
    """The median rate and the lowest-highest repeat."""
    return f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"


def create_raw_tables(dsn: str) -> None:
    """The raw baseline's tables, beside Signoff's."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE raw_approvals (id text PRIMARY KEY, status text, version int)")
        conn.execute(
            "CREATE TABLE raw_audit (seq int PRIMARY KEY, approval_id text, "
            "detail jsonb, prev_hash text, hash text)"
        )
        conn.execute("CREATE TABLE raw_head (id int PRIMARY KEY, seq int, hash text)")
        conn.execute(
            "CREATE TABLE raw_entries (seq serial PRIMARY KEY, approval_id text, "
            "detail jsonb, prev_hash text, hash text)"
        )
        conn.execute("INSERT INTO raw_head VALUES (1, 0, 'g')")


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer decisions per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    count = 200 if options.quick else 1000
    with scratch_database() as dsn:
        bench = open_bench(dsn)
        create_raw_tables(dsn)
        print(
            f"decisions/s on PostgreSQL, {count} decisions a repeat, median of "
            f"{options.repeats} interleaved repeats"
        )
        print("| deciders | decide/s | raw/s | raw, no chain/s | decide/raw |")
        print("|---|---|---|---|---|")
        for threads in THREADS:
            decided, raw, unchained = [], [], []
            for _ in range(options.repeats):
                decided.append(decide_rate(bench, count, threads))
                raw.append(raw_rate(dsn, count, threads))
                unchained.append(raw_rate(dsn, count, threads, chained=False))
            d, r = statistics.median(decided), statistics.median(raw)
            print(
                f"| {threads} | {spread(decided)} | {spread(raw)} | {spread(unchained)} "
                f"| {d / r:.2f} |"
            )
        verdict = "met" if d >= GOAL else "not met"
        print(f"goal: {GOAL:,} decisions/s with {THREADS[-1]} deciders: {verdict}")
        bench.runtime.store.engine.dispose()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
