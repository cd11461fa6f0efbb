"""Deciding with the approval the caller has just read: one read fewer, never a wrong answer."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from agent_runtime import ApprovalPolicy, Approvals, Decision, new_run_id, tool
from agent_runtime.approval_service import ToolLookup
from agent_runtime.approvals import Actor, Approval, ApprovalId, ApprovalStatus
from agent_runtime.clock import FrozenClock
from agent_runtime.testing import InMemoryApprovalStore, InMemoryStore

DANA, ERIN, REQ = Actor(user_id="U_DANA"), Actor(user_id="U_ERIN"), Actor(user_id="U_REQ")


@tool(side_effect=True, approval=ApprovalPolicy(approvers=("U_DANA", "U_ERIN"), required=2))
def wire(amount_cents: int) -> str:
    """Wire money (two approvers)."""
    return "wired"


class CountingStore(InMemoryApprovalStore):
    """The in-memory approval store, counting reads of one approval."""

    reads = 0

    def get_approval(self, approval_id: str) -> Approval:
        """Read the approval and count the read."""
        self.reads += 1
        return super().get_approval(approval_id)


def world() -> tuple[Approvals, CountingStore, Approval]:
    """An approvals service, its store, and a pending wire that needs two approvers."""
    clock = FrozenClock(datetime(2026, 12, 1, 9, tzinfo=UTC))
    runs = InMemoryStore()
    store = CountingStore(runs)
    lookup = ToolLookup()
    lookup.add(wire)
    approvals = Approvals(store, clock, lookup)
    run_id = runs.create_run(new_run_id(), "wf", None, clock.now()).id
    assert wire.approval is not None
    asked = approvals.request(
        run_id=run_id,
        position=1,
        tool=wire,
        args={"amount_cents": 100},
        policy=wire.approval.snapshot({}),
        requester=REQ,
        now=clock.now(),
    )
    store.reads = 0
    return approvals, store, asked


def test_the_approval_given_is_not_read_again() -> None:
    """A decision on the approval as just read saves it without reading it again."""
    approvals, store, asked = world()
    result = approvals.decide(asked.id, DANA, Decision.APPROVE, current=asked)
    assert result.accepted
    assert store.reads == 0
    assert [vote["user_id"] for vote in approvals.get(asked.id).approvals] == ["U_DANA"]


def test_a_stale_approval_given_costs_a_retry_not_a_lost_vote() -> None:
    """If the approval changed after the caller read it, the compare-and-set fails and the
    decision is judged again on a fresh read: the second vote approves the call."""
    approvals, store, asked = world()
    assert approvals.decide(asked.id, DANA, Decision.APPROVE).accepted
    result = approvals.decide(asked.id, ERIN, Decision.APPROVE, current=asked)
    assert result.accepted
    assert result.approval.status == ApprovalStatus.APPROVED
    assert store.reads == 2  # DANA's decision read it; ERIN's read it after the failed save


def test_a_refusal_of_the_approval_given_is_checked_on_a_fresh_read() -> None:
    """A refusal judged on the caller's copy is judged again as the approval is now, so a
    copy older than the decision never refuses it wrongly."""
    approvals, _, asked = world()
    approvals.decide(asked.id, DANA, Decision.APPROVE)
    fresh = approvals.get(asked.id)
    result = approvals.decide(asked.id, DANA, Decision.APPROVE, current=fresh)
    assert not result.accepted
    assert "already" in result.message


def test_an_approval_given_for_another_id_is_ignored() -> None:
    """A copy of some other approval is not taken for the one decided."""
    approvals, store, asked = world()
    wrong = replace(approvals.get(asked.id), id=ApprovalId("a" * 32))
    assert approvals.decide(asked.id, DANA, Decision.APPROVE, current=wrong).accepted
    assert store.reads == 2  # the test's own read, then decide's
