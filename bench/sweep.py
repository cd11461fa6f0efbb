"""The approvals sweep at 10,000 pending approvals: the index-backed read beside the old scan.

Run ``python -m bench.sweep`` (``--pending`` to change the count, ``--repeats`` the samples).

Set-up, torn down at the end: a fresh PostgreSQL database on ``SIGNOFF_BENCH_PG_URL`` (default:
the local server, as the other benchmarks) and a SQLite file, both migrated, each with one run
holding ``--pending`` pending approvals due over the next days (none due now, the usual case:
every poll of every worker sweeps, and almost always finds nothing).

Each sample, interleaved, times one call on one connection from the pool:

* ``sweep``: ``SqlApprovalStore.due_approvals`` (the partial index on the next due time);
* ``scan``: the query the sweep ran before, ``status = 'pending' AND (deadline <= now OR
  remind_at <= now)``, which no index serves;
* ``raw``: ``SELECT 1``, the round trip every query pays.

It prints the median and the 10th-90th percentile spread of each, in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, or_, select, text

from agent_runtime import new_run_id
from bench._common import scratch_database, sqlalchemy_pg_url
from store import open_store
from store.approval_store import SqlApprovalStore
from store.models import approvals, runs

T0 = datetime.now(UTC)
SCAN = select(approvals).where(
    approvals.c.status == "pending",
    or_(approvals.c.deadline <= T0, approvals.c.remind_at <= T0),
)


def fill(engine: Engine, pending: int) -> None:
    """One waiting run with ``pending`` approvals, due one a minute from an hour on."""
    run_id = new_run_id()
    with engine.begin() as conn:
        conn.execute(
            insert(runs).values(
                id=run_id, workflow="wf", status="waiting", created_at=T0, updated_at=T0, fence=0
            )
        )
        conn.execute(insert(approvals), [_row(run_id, n) for n in range(pending)])
        if engine.dialect.name == "postgresql":
            conn.execute(text("ANALYZE approvals"))


def _row(run_id: str, n: int) -> dict[str, Any]:
    deadline = T0 + timedelta(hours=1, minutes=n)
    remind_at = T0 + timedelta(minutes=30 + n) if n % 2 else None
    return {
        "id": f"a{n:023d}",
        "run_id": run_id,
        "position": n,
        "kind": "tool_call",
        "tool": "refund",
        "args": {"order_id": str(n), "amount_cents": 4999},
        "args_hash": "0" * 64,
        "fingerprint": "0" * 64,
        "policy": {"approvers": ["U_DANA"], "required": 1, "deadline_seconds": 3600},
        "requester": {"user_id": "U_RITA"},
        "requested_at": T0,
        "deadline": deadline,
        "reason_asked": "",
        "status": "pending",
        "votes": [],
        "escalated": False,
        "remind_at": remind_at,
        "next_due_at": min(deadline, remind_at or deadline),
        "version": 0,
    }


def timings(engine: Engine, repeats: int) -> dict[str, list[float]]:
    """Milliseconds of each way, ``repeats`` interleaved samples each."""
    store = SqlApprovalStore(engine)

    def scan() -> None:
        with engine.connect() as conn:
            assert conn.execute(SCAN).all() == []

    def raw() -> None:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1")).one()

    ways: dict[str, Callable[[], object]] = {
        "sweep": lambda: store.due_approvals(T0),
        "scan": scan,
        "raw": raw,
    }
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, way in ways.items():
            began = time.perf_counter()
            way()
            samples[name].append((time.perf_counter() - began) * 1000)
    return samples


def spread(values: list[float]) -> str:
    """Median and 10th-90th percentile, in milliseconds."""
    deciles = statistics.quantiles(values, n=10)
    return f"{statistics.median(values):.2f} ({deciles[0]:.2f}-{deciles[-1]:.2f})"


@contextmanager
def postgres() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped at the end."""
    with scratch_database() as dsn:
        yield sqlalchemy_pg_url(dsn).replace("postgresql://", "postgresql+psycopg://")


def measure(url: str, pending: int, repeats: int) -> dict[str, list[float]]:
    """Fill the database at ``url`` and time the three ways."""
    store = open_store(url)
    try:
        fill(store.engine, pending)
        return timings(store.engine, repeats)
    finally:
        store.engine.dispose()


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=50)
    options = parser.parse_args()
    print(
        f"approvals sweep at {options.pending:,} pending (none due), ms per sweep: median "
        f"(10th-90th percentile) of {options.repeats} interleaved samples"
    )
    print("| database | sweep (index) | scan (before) | raw round trip | scan/sweep |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder, postgres() as pg_url:
        for name, url in (("PostgreSQL", pg_url), ("SQLite", f"sqlite:///{Path(folder) / 's.db'}")):
            got = measure(url, options.pending, options.repeats)
            ratio = statistics.median(got["scan"]) / statistics.median(got["sweep"])
            print(
                f"| {name} | {spread(got['sweep'])} | {spread(got['scan'])} | "
                f"{spread(got['raw'])} | {ratio:.1f}x |"
            )


if __name__ == "__main__":
    main()
