"""Rule limits hold across processes: two requesters on PostgreSQL racing a limit of 1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from agent_runtime import ApprovalPolicy, Approvals, SystemClock, new_run_id, tool
from agent_runtime.approvals import Actor, Approval, ApprovalStatus
from agent_runtime.audit_report import examine
from agent_runtime.rules import Rules
from agent_runtime.tool_lookup import ToolLookup
from store import SqlStore, open_store
from store.approval_store import SqlApprovalStore

POLICY = ApprovalPolicy(approvers=("U_DANA",))
ROUNDS = 5


@tool(side_effect=True, approval=POLICY)
def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return "ok"


def _rules(round_no: int) -> Rules:
    return Rules.parse(
        [
            {
                "id": f"one-an-hour-{round_no}",
                "tool": "issue_refund",
                "action": "auto_approve",
                "limits": {"per_hour": 1},
            }
        ]
    )


@pytest.fixture
def second_engine(pg_store: SqlStore, pg_url: str) -> Iterator[SqlStore]:
    """Another connection pool on the same database, as a second process has."""
    other = open_store(pg_url, migrate=False)
    yield other
    other.engine.dispose()


def _service(store: SqlStore, rules: Rules) -> Approvals:
    lookup = ToolLookup()
    lookup.add(issue_refund)
    return Approvals(SqlApprovalStore(store.engine), SystemClock(), lookup, rules=rules)


def _race(services: list[Approvals], runs: list[str], now: datetime) -> list[Approval]:
    """Request one approval through each service at the same moment; return them all."""
    start = threading.Barrier(len(services))
    got: list[Approval] = []

    def ask(service: Approvals, run_id: str) -> None:
        start.wait(timeout=30)
        got.append(
            service.request(
                run_id=run_id,
                position=1,
                tool=issue_refund,
                args={"order_id": run_id, "amount_cents": 100},
                policy=POLICY.snapshot({}),
                requester=Actor(user_id="U_REQ"),
                now=now,
            )
        )

    threads = [threading.Thread(target=ask, args=pair) for pair in zip(services, runs, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return got


def test_two_requesters_racing_a_limit_of_one_get_one_auto_approval(
    pg_store: SqlStore, second_engine: SqlStore
) -> None:
    """In every round, exactly one of two simultaneous requests is approved by the rule."""
    now = datetime.now(UTC)
    for round_no in range(ROUNDS):
        rules = _rules(round_no)
        services = [_service(pg_store, rules), _service(second_engine, rules)]
        runs: list[str] = [pg_store.create_run(new_run_id(), "wf", None, now).id for _ in services]
        got = _race(services, runs, now)
        assert sorted(a.status for a in got) == [ApprovalStatus.APPROVED, ApprovalStatus.PENDING]
    entries, heads = SqlApprovalStore(pg_store.engine).audit_log()
    assert examine(entries, heads).problems == []
    assert [e.action for e in entries].count("rule.limited") == ROUNDS
