"""Every list Signoff shows, with 100,000 finished and 10,000 waiting runs, on PostgreSQL.

Run ``python -m bench.lists`` (``--quick`` for fewer repeats, ``--finished`` and
``--waiting`` for other sizes).

Set-up, torn down at the end: a fresh, migrated PostgreSQL database on
``SIGNOFF_BENCH_PG_URL`` (default: the local server, as the other benchmarks). One run and
its pending approval are made through the engine, exactly as a Slack ``/agent`` run asks
for one; the database then copies them in bulk (``INSERT … SELECT`` over
``generate_series``): the finished runs (half of them with a decided approval) and the
waiting runs, each waiting on one pending approval, spread over 500 requesters and 50
channels, with ``U_DANA`` among the approvers of every pending approval. Then ``ANALYZE``.

Each list is read through the store, as the command that shows it does; repeat by repeat
the lists are interleaved. It prints p50, p99 and max milliseconds per list, the ratio of
each p50 to that of reading one run by its id (the baseline: no list can be cheaper), and
p50 and p99 of the list's statement in the server alone (``EXPLAIN ANALYZE``, after each
call): on a busy machine the client's share moves most.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
from sqlalchemy import Engine, event, select

from agent_runtime import ApprovalStatus, RunId, RunStatus, SystemClock
from bench._common import scratch_database
from bench.decisions import Bench, open_bench, pg_url
from store import SqlStore
from store.models import runs
from store.run_sql import claim_statement

SEED_RUNS = """
INSERT INTO runs (id, workflow, status, input, created_at, updated_at, due_at, wait_key, fence)
SELECT md5('run' || i)::uuid, t.workflow,
       CASE WHEN i <= %(finished)s THEN 'completed' ELSE 'waiting' END,
       jsonb_set(
           jsonb_set(t.input, '{requester,user_id}', to_jsonb('U' || (i %% 500))),
           '{context,slack,channel}', to_jsonb('C' || (i %% 50))),
       t.created_at - make_interval(secs => %(total)s - i),
       t.created_at - make_interval(secs => %(total)s - i),
       CASE WHEN i <= %(finished)s THEN NULL ELSE t.created_at + interval '1 day' END,
       CASE WHEN i <= %(finished)s THEN NULL ELSE 'approval:a' || i END,
       1
FROM generate_series(1, %(total)s) AS i, runs AS t
WHERE t.id = %(template)s
"""

SEED_APPROVALS = """
INSERT INTO approvals
SELECT ('a' || i), md5('run' || i)::uuid, t.position, t.kind, t.tool, t.args, t.args_hash,
       t.fingerprint,
       jsonb_set(t.policy, '{approvers}', jsonb_build_array('U_DANA', 'U' || (i %% 500))),
       t.requester, r.created_at, r.created_at + interval '1 day', t.reason_asked,
       CASE WHEN i <= %(finished)s THEN 'approved' ELSE 'pending' END,
       t.votes, t.decided_by, t.decided_at, t.decided_args, t.decided_args_hash, t.reason,
       t.diff, t.escalated, t.remind_at, t.consumed_by, t.version
FROM generate_series(1, %(total)s) AS i
JOIN runs AS r ON r.id = md5('run' || i)::uuid, approvals AS t
WHERE t.id = %(template)s AND (i > %(finished)s OR i %% 2 = 0)
"""


def seed(bench: Bench, dsn: str, finished: int, waiting: int) -> None:
    """Copy one engine-made run and approval into ``finished`` + ``waiting`` of each."""
    (template,) = bench.pending(1)
    run_id = bench.approvals.store.get_approval(template).run_id
    params = {"finished": finished, "total": finished + waiting}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SEED_RUNS, params | {"template": uuid.UUID(hex=run_id)})
        conn.execute(SEED_APPROVALS, params | {"template": template})
        conn.execute("ANALYZE")


def _one_run(engine: Engine, run_id: RunId) -> Any:
    """Read one run by its primary key, through SQLAlchemy (``Runtime.get`` reads it on the
    store's driver connections, which ``last_statement`` does not see)."""
    with engine.connect() as conn:
        return conn.execute(select(runs).where(runs.c.id == run_id)).one()


def lists(bench: Bench, finished: int) -> dict[str, Callable[[], Any]]:
    """The lists to time, by the command that shows each, and the baseline first."""
    runtime, approvals = bench.runtime, bench.approvals.store
    store: SqlStore = runtime.store  # type: ignore[assignment]
    one = RunId(hashlib.md5(f"run{finished // 2}".encode()).hexdigest())
    deep = runtime.runs(status=RunStatus.COMPLETED, limit=1, after=one)[0].id
    now = SystemClock().now()
    return {
        "baseline: one run by id": lambda: _one_run(store.engine, one),
        "signoff runs": lambda: runtime.runs(limit=50),
        "signoff runs --status waiting": lambda: runtime.runs(status=RunStatus.WAITING, limit=50),
        "signoff runs --status completed, a deep page": lambda: runtime.runs(
            status=RunStatus.COMPLETED, limit=50, after=deep
        ),
        "/agent list (a channel's runs)": lambda: runtime.runs(
            input_fields={"context.slack.channel": "C7"}, limit=15
        ),
        "/agent status (a requester's latest)": lambda: runtime.runs(
            input_fields={"requester.user_id": "U7"}, limit=1
        ),
        "signoff approvals --pending": lambda: approvals.list_approvals(
            status=ApprovalStatus.PENDING
        ),
        "/agent pending (approver of all)": lambda: approvals.list_approvals(
            status=ApprovalStatus.PENDING, decidable_by="U_DANA", limit=15
        ),
        "/agent pending (approver of 20)": lambda: approvals.list_approvals(
            status=ApprovalStatus.PENDING, decidable_by="U7", limit=15
        ),
        "/agent pending (approver of none)": lambda: approvals.list_approvals(
            status=ApprovalStatus.PENDING, decidable_by="U_NOBODY", limit=15
        ),
        "signoff show (a run's approvals)": lambda: approvals.list_approvals(run_id=one),
        "claim (nothing due)": lambda: _claim_through_sqlalchemy(store, now),
    }


def _claim_through_sqlalchemy(store: SqlStore, now: Any) -> None:
    """Run the store's claim statement (which the store sends on its own driver connections,
    out of sight of SQLAlchemy's events) through the engine, and roll it back."""
    statement = claim_statement(postgres=True)
    params = {"owner": "bench", "limit": 8, "now": now, "expires_at": now + timedelta(seconds=30)}
    with store.engine.connect() as conn:
        conn.execute(statement, params).all()
        conn.rollback()


def last_statement(engine: Engine, call: Callable[[], Any]) -> tuple[str, Any]:
    """Call ``call`` and return the last statement it sent, with its parameters."""
    sent: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        sent.append((statement, params))

    event.listen(engine, "before_cursor_execute", record)
    try:
        call()
    finally:
        event.remove(engine, "before_cursor_execute", record)
    return sent[-1]


def explain(engine: Engine, statement: str, params: Any, *, analyze: bool = False) -> Any:
    """Return PostgreSQL's plan of ``statement`` (JSON), run and rolled back if ``analyze``."""
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(f"EXPLAIN ({options}) {statement}", params)
        row = cursor.fetchone()
        conn.rollback()
    assert row is not None
    return row[0][0]


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an ``explain`` plan's ``Plan``, the node itself first."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def measure(
    engine: Engine, actions: dict[str, Callable[[], Any]], repeats: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Milliseconds of each action through the store, and of its statement in the server
    (``EXPLAIN ANALYZE``'s execution time), ``repeats`` times, interleaved."""
    statements = {name: last_statement(engine, action) for name, action in actions.items()}
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in actions}
    for _ in range(repeats):
        for name, action in actions.items():
            started = time.perf_counter()
            action()
            samples[name][0].append((time.perf_counter() - started) * 1000)
            plan = explain(engine, *statements[name], analyze=True)
            samples[name][1].append(plan["Execution Time"])
    return samples


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def report(samples: dict[str, tuple[list[float], list[float]]]) -> None:
    """Print p50, p99 and max through the store, the ratio of each p50 to the baseline's,
    and p50 and p99 of the statement in the server."""
    base = statistics.median(next(iter(samples.values()))[0])
    print("| list | p50 ms | p99 ms | max ms | p50 / baseline | SQL p50 ms | SQL p99 ms |")
    print("|---|---|---|---|---|---|---|")
    for name, (values, server) in samples.items():
        p50 = statistics.median(values)
        print(
            f"| {name} | {p50:.2f} | {_p(values, 0.99):.2f} | {max(values):.2f} "
            f"| {p50 / base:.1f}x | {statistics.median(server):.3f} | {_p(server, 0.99):.3f} |"
        )


def main() -> None:
    """Seed, measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--finished", type=int, default=100_000)
    parser.add_argument("--waiting", type=int, default=10_000)
    options = parser.parse_args()
    repeats = 50 if options.quick else 300
    with scratch_database() as dsn:
        bench = open_bench(pg_url(dsn))
        started = time.perf_counter()
        seed(bench, dsn, options.finished, options.waiting)
        print(
            f"{options.finished:,} finished and {options.waiting:,} waiting runs on PostgreSQL "
            f"(seeded in {time.perf_counter() - started:.1f} s); {repeats} interleaved repeats"
        )
        engine: Engine = bench.runtime.store.engine  # type: ignore[attr-defined]
        report(measure(engine, lists(bench, options.finished), repeats))
        bench.runtime.store.engine.dispose()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
