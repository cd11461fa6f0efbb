"""Approving and rejecting judge the approval as stored, under its lock: no read before."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_runtime import ApprovalPolicy, Approvals, Decision, new_run_id, tool
from agent_runtime.approvals import Actor, Approval, ApprovalStatus
from agent_runtime.clock import FrozenClock
from agent_runtime.store import Judge, Save
from agent_runtime.testing import InMemoryApprovalStore, InMemoryStore
from agent_runtime.tool_lookup import ToolLookup

DANA, ERIN, EVE = Actor(user_id="U_DANA"), Actor(user_id="U_ERIN"), Actor(user_id="U_EVE")
REQ = Actor(user_id="U_REQ")


@tool(side_effect=True, approval=ApprovalPolicy(approvers=("U_DANA", "U_ERIN"), required=2))
def wire(amount_cents: int) -> str:
    """Wire money (two approvers).

    Args:
        amount_cents: How much.
    """
    return "wired"


class CountingStore(InMemoryApprovalStore):
    """The in-memory approval store, counting reads of one approval outside a decision."""

    reads = 0

    def get_approval(self, approval_id: str) -> Approval:
        """Read the approval and count the read."""
        self.reads += 1
        return super().get_approval(approval_id)

    def decide_approval(self, approval_id: str, judge: Judge) -> tuple[Approval, Save | None]:
        """Decide as the store does, its own read not counted."""
        reads = self.reads
        try:
            return super().decide_approval(approval_id, judge)
        finally:
            self.reads = reads


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


def test_two_votes_approve_with_no_read_before_the_lock() -> None:
    """Each approver's vote is judged on the approval as the other left it: the second
    vote approves the wire, and neither decision read the approval beforehand."""
    approvals, store, asked = world()
    first = approvals.decide(asked.id, DANA, Decision.APPROVE)
    second = approvals.decide(asked.id, ERIN, Decision.APPROVE)
    assert (first.accepted, first.approval.status) == (True, ApprovalStatus.PENDING)
    assert (second.accepted, second.approval.status) == (True, ApprovalStatus.APPROVED)
    assert [v["user_id"] for v in second.approval.approvals] == ["U_DANA", "U_ERIN"]
    assert store.reads == 0


def test_a_refused_decision_is_recorded_and_changes_nothing() -> None:
    """An outsider's click is refused as unauthorized, in the audit log, and the approval
    stays as it was."""
    approvals, store, asked = world()
    result = approvals.decide(asked.id, EVE, Decision.APPROVE)
    assert (result.accepted, result.refused_as) == (False, "unauthorized")
    assert store.get_approval(asked.id) == asked
    assert [e.action for e in store.audit_log()[0]] == ["requested", "unauthorized"]


def test_a_late_decision_is_refused_on_the_approval_as_stored() -> None:
    """A rejection after the approval was decided is judged on the stored approval and
    told who decided it."""
    approvals, _, asked = world()
    approvals.decide(asked.id, DANA, Decision.REJECT, reason="no")
    late = approvals.decide(asked.id, ERIN, Decision.APPROVE)
    assert late.accepted is False
    assert late.message.startswith("already rejected by U_DANA")


def test_an_edit_reads_the_approval_before_deciding() -> None:
    """An edit (whose preview may run the tool's code) is judged on a read, outside any
    lock, and saved by compare-and-set."""
    approvals, store, asked = world()
    result = approvals.decide(
        asked.id, DANA, Decision.EDIT, edited_args={"amount_cents": 50}, reason="less"
    )
    assert result.accepted is True
    assert result.approval.decided_args == {"amount_cents": 50}
    assert store.reads == 1
