"""The approvals sweep reads due approvals from its partial index on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, insert, select, text

from agent_runtime import new_run_id
from store import SqlStore
from store.approval_store import DUE
from store.models import approvals, runs

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PENDING, DECIDED = 5_000, 5_000


def _fill(conn: Connection) -> None:
    """One run with many approvals: pending ones due over the next days, decided ones not."""
    run_id = new_run_id()
    conn.execute(
        insert(runs).values(
            id=run_id, workflow="wf", status="waiting", input=None, created_at=T0, updated_at=T0
        )
    )
    rows = [_row(run_id, n, pending=n < PENDING) for n in range(PENDING + DECIDED)]
    conn.execute(insert(approvals), rows)
    conn.execute(text("ANALYZE approvals"))


def _row(run_id: str, n: int, *, pending: bool) -> dict[str, object]:
    due = T0 + timedelta(minutes=n)
    return {
        "id": f"a{n:023d}",
        "run_id": run_id,
        "position": n,
        "kind": "tool_call",
        "tool": "refund",
        "args": {},
        "args_hash": "0" * 64,
        "fingerprint": "0" * 64,
        "policy": {},
        "requester": {"user_id": "U_REQ"},
        "requested_at": T0,
        "deadline": due,
        "reason_asked": "",
        "status": "pending" if pending else "approved",
        "votes": [],
        "escalated": False,
        "next_due_at": due if pending else None,
        "version": 0,
    }


def test_the_sweep_query_uses_the_partial_index_of_due_times(pg_store: SqlStore) -> None:
    """EXPLAIN of the sweep's query at 10,000 approvals names the next-due-time index."""
    with pg_store.engine.begin() as conn:
        _fill(conn)
        compiled = DUE.compile(dialect=conn.dialect)
        plan = conn.exec_driver_sql(
            "EXPLAIN " + compiled.string, {"now": T0 + timedelta(minutes=10), "limit": 100}
        ).scalars()
        shown = "\n".join(plan)
    assert "ix_approvals_next_due_at" in shown, shown
    assert "Seq Scan" not in shown, shown


def test_only_pending_approvals_are_in_the_index(pg_store: SqlStore) -> None:
    """The index is partial: decided approvals (no next due time) take no room in it."""
    with pg_store.engine.begin() as conn:
        definition = conn.execute(
            select(text("indexdef"))
            .select_from(text("pg_indexes"))
            .where(text("indexname = 'ix_approvals_next_due_at'"))
        ).scalar_one()
    assert "WHERE (next_due_at IS NOT NULL)" in definition
