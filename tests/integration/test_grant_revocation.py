"""A revoked grant stops at once on every instance: two stores on PostgreSQL, one revoking
while the other keeps asking."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import count

import pytest

from agent_runtime import ApprovalPolicy, Approvals, SystemClock, new_run_id, tool
from agent_runtime.approvals import Actor, Approval, ApprovalStatus
from agent_runtime.audit_report import examine
from agent_runtime.grant_service import Grants
from agent_runtime.grants import Grant, GrantScope
from agent_runtime.tool_lookup import ToolLookup
from store import SqlStore, open_store
from store.approval_store import SqlApprovalStore

POLICY = ApprovalPolicy(approvers=("U_DANA",))
DANA, REQ = Actor(user_id="U_DANA"), Actor(user_id="U_REQ")
ASKS = 40


@tool(side_effect=True, approval=POLICY)
def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return "ok"


@pytest.fixture
def second_engine(pg_store: SqlStore, pg_url: str) -> Iterator[SqlStore]:
    """Another connection pool on the same database, as a second process has."""
    other = open_store(pg_url, migrate=False)
    yield other
    other.engine.dispose()


def _grants(store: SqlStore) -> Grants:
    lookup = ToolLookup()
    lookup.add(issue_refund)
    approvals = Approvals(SqlApprovalStore(store.engine), SystemClock(), lookup)
    return Grants(approvals, SystemClock())


class Asker:
    """Asks for refunds in one run through one instance, at successive positions."""

    def __init__(self, grants: Grants, run_id: str) -> None:
        self.approvals = grants.approvals
        self.run_id = run_id
        self.positions = count(1)

    def ask(self, amount: int = 100) -> Approval:
        return self.approvals.request(
            run_id=self.run_id,
            position=next(self.positions),
            tool=issue_refund,
            args={"order_id": "1042", "amount_cents": amount},
            policy=POLICY.snapshot({}),
            requester=REQ,
            now=datetime.now(UTC),
        )


def _granted(first: Grants, asker: Asker) -> Grant:
    asked = asker.ask(5000)
    result = first.approve_and_grant(asked.id, DANA, GrantScope.RUN, seen_hash=asked.args_hash)
    assert result.grant is not None
    return result.grant


def test_a_grant_made_on_one_instance_decides_on_the_other_until_revoked(
    pg_store: SqlStore, second_engine: SqlStore
) -> None:
    """Instance B's requests are approved by A's grant; after A revokes, B's are pending."""
    first, second = _grants(pg_store), _grants(second_engine)
    run_id = pg_store.create_run(new_run_id(), "wf", None, datetime.now(UTC)).id
    asker = Asker(second, run_id)
    grant = _granted(first, asker)
    assert asker.ask().status == ApprovalStatus.APPROVED
    first.revoke(grant.id, DANA)
    assert asker.ask().status == ApprovalStatus.PENDING
    assert second.list(active=True) == []


def test_no_call_is_decided_by_a_grant_after_its_revocation(
    pg_store: SqlStore, second_engine: SqlStore
) -> None:
    """Racing a revocation, every approval by the grant precedes the revocation in the audit
    chain, and every request made after the revocation returned stays pending."""
    first, second = _grants(pg_store), _grants(second_engine)
    run_id = pg_store.create_run(new_run_id(), "wf", None, datetime.now(UTC)).id
    asker = Asker(second, run_id)
    grant = _granted(first, asker)
    asking, revoked = threading.Event(), threading.Event()
    after: list[Approval] = []

    def keep_asking() -> None:
        # asks until ASKS of them began after the revocation returned, however the two
        # threads happen to be scheduled
        while len(after) < ASKS:
            done = revoked.is_set()
            got = asker.ask()
            asking.set()
            if done:
                after.append(got)

    thread = threading.Thread(target=keep_asking)
    thread.start()
    try:
        assert asking.wait(60), "the asker never asked"
        first.revoke(grant.id, DANA)
    finally:
        revoked.set()
        thread.join(timeout=120)
    assert not thread.is_alive()
    assert len(after) == ASKS
    assert {a.status for a in after} == {ApprovalStatus.PENDING}
    entries, heads = SqlApprovalStore(pg_store.engine).audit_log()
    assert examine(entries, heads).problems == []
    (revocation,) = [e for e in entries if e.action == "grant.revoked"]
    by_grant = [e for e in entries if (e.actor or {}).get("user_id") == f"grant:{grant.id}"]
    assert all(e.seq < revocation.seq for e in by_grant if e.action == "approve")


class StaleReads(SqlApprovalStore):
    """An approval store whose grant lists are the ones read before a revocation: the window
    between an instance reading a grant and storing the approval it decides."""

    def __init__(self, store: SqlStore, before: list[Grant]) -> None:
        super().__init__(store.engine)
        self.before = before

    def list_grants(
        self,
        *,
        active_at: datetime | None = None,
        tool: str | None = None,
        limit: int = 100,
        granted_by: Actor | None = None,
    ) -> list[Grant]:
        """The grants as they were before the revocation."""
        return self.before


def test_a_grant_revoked_after_it_was_read_decides_nothing(
    pg_store: SqlStore, second_engine: SqlStore
) -> None:
    """An instance that read the grant before another revoked it stores the approval pending,
    with a grant.lapsed entry: the grant is checked again inside the storing transaction."""
    first = _grants(pg_store)
    run_id = pg_store.create_run(new_run_id(), "wf", None, datetime.now(UTC)).id
    grant = _granted(first, Asker(first, run_id))
    lookup = ToolLookup()
    lookup.add(issue_refund)
    stale = Approvals(StaleReads(second_engine, [grant]), SystemClock(), lookup)
    first.revoke(grant.id, DANA)
    asked = Asker(Grants(stale, SystemClock()), run_id)
    next(asked.positions)
    assert asked.ask().status == ApprovalStatus.PENDING
    entries, heads = SqlApprovalStore(pg_store.engine).audit_log()
    assert examine(entries, heads).problems == []
    assert [e.action for e in entries][-2:] == ["requested", "grant.lapsed"]
