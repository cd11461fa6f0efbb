"""The agent loop on the in-memory fakes: approvals, decisions, idempotency, budgets."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from agent_runtime import (
    Agents,
    ApprovalPolicy,
    Approvals,
    ApprovalStatus,
    Budget,
    Decision,
    InvalidInput,
    OnExpiry,
    RunId,
    RunStatus,
    UnknownOutcome,
)
from agent_runtime.agent_loop import InputEstimate
from agent_runtime.approvals import ApprovalKind
from agent_runtime.deployment import tool_lookup
from agent_runtime.models import Message, ToolCall, ToolSpec, tool_reply
from agent_runtime.testing import FrozenClock
from tests.unit.agent_harness import (
    BOTH,
    DANA,
    DONE,
    EVE,
    LOOKUP,
    OMAR,
    REFUND,
    REQUESTER,
    AgentHarness,
)


def _until_waiting(h: AgentHarness) -> RunId:
    run_id = h.start()
    h.work()
    assert h.run(run_id).status == RunStatus.WAITING
    return run_id


def test_read_only_tool_runs_without_approval_and_side_effect_waits() -> None:
    """A lookup runs at once; a refund parks the run on a pending approval and does not run."""
    h = AgentHarness([LOOKUP, REFUND, DONE])
    run_id = _until_waiting(h)
    assert h.calls == {"lookup_order": 1}
    assert len(h.pending(run_id)) == 1


def test_approved_call_runs_once_with_its_key() -> None:
    """After approval the tool runs once, with the key derived from run and position."""
    h = AgentHarness([REFUND, DONE])
    run_id = _until_waiting(h)
    (approval,) = h.pending(run_id)
    result = h.approvals.decide(approval, DANA, Decision.APPROVE)
    assert result.accepted
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    assert h.calls["issue_refund"] == 1
    assert h.keys[0].startswith(f"signoff-{run_id}-")


def test_outsider_and_requester_cannot_decide() -> None:
    """A user outside the policy and the requester are refused, recorded, and nothing changes."""
    h = AgentHarness([REFUND, DONE])
    (approval,) = h.pending(_until_waiting(h))
    for who in (EVE, REQUESTER):
        result = h.approvals.decide(approval, who, Decision.APPROVE)
        assert not result.accepted
    assert h.approvals.get(approval).status == ApprovalStatus.PENDING
    actions = [e.action for e in h.approval_store.audit_log()[0]]
    assert actions == ["requested", "unauthorized", "unauthorized"]


def test_requester_may_approve_when_policy_allows() -> None:
    """With allow_requester the person who asked may approve."""
    h = AgentHarness(
        [REFUND, DONE], policy=ApprovalPolicy(approvers=("U_REQ",), allow_requester=True)
    )
    (approval,) = h.pending(_until_waiting(h))
    assert h.approvals.decide(approval, REQUESTER, Decision.APPROVE).accepted


def test_second_decision_is_told_who_decided() -> None:
    """A late decision is refused with who decided and when, and is audited as late."""
    h = AgentHarness([REFUND, DONE])
    (approval,) = h.pending(_until_waiting(h))
    h.approvals.decide(approval, DANA, Decision.APPROVE)
    late = h.approvals.decide(approval, OMAR, Decision.REJECT, reason="no")
    assert not late.accepted
    assert late.message.startswith("already approved by dana at ")
    assert h.approval_store.audit_log()[0][-1].action == "late"


def test_rejection_reason_goes_back_to_the_model() -> None:
    """A rejected call is not run and the model reads who rejected it and why."""
    h = AgentHarness([REFUND, DONE])
    run_id = _until_waiting(h)
    (approval,) = h.pending(run_id)
    h.approvals.decide(approval, DANA, Decision.REJECT, reason="customer already refunded")
    h.work()
    assert h.calls["issue_refund"] == 0
    assert h.tool_results(run_id) == ["not executed: rejected by dana: customer already refunded"]


def test_rejection_needs_a_reason() -> None:
    """Rejecting without a reason is refused and changes nothing."""
    h = AgentHarness([REFUND, DONE])
    (approval,) = h.pending(_until_waiting(h))
    assert not h.approvals.decide(approval, DANA, Decision.REJECT, reason=" ").accepted
    assert h.approvals.get(approval).status == ApprovalStatus.PENDING


def test_edit_then_approve_runs_the_edited_arguments_and_records_the_diff() -> None:
    """Edited arguments are validated, their diff recorded, and the tool runs with them."""
    h = AgentHarness([REFUND, DONE])
    run_id = _until_waiting(h)
    (approval,) = h.pending(run_id)
    with pytest.raises(InvalidInput):
        h.approvals.decide(
            approval, DANA, Decision.EDIT, edited_args={"order_id": "1042", "amount_cents": "lots"}
        )
    edited = {"order_id": "1042", "amount_cents": 2500}
    assert h.approvals.decide(approval, DANA, Decision.EDIT, edited_args=edited).accepted
    h.work()
    decided = h.approvals.get(approval)
    assert decided.diff == [{"field": "amount_cents", "from": 4999, "to": 2500}]
    assert json.loads(h.tool_results(run_id)[0])["refunded"] == 2500


def test_two_approvers_required() -> None:
    """With required=2 one approval is not enough and the same person cannot count twice."""
    h = AgentHarness(
        [REFUND, DONE], policy=ApprovalPolicy(approvers=("U_DANA", "U_OMAR"), required=2)
    )
    run_id = _until_waiting(h)
    (approval,) = h.pending(run_id)
    assert h.approvals.decide(approval, DANA, Decision.APPROVE).message.endswith("1 more needed")
    assert not h.approvals.decide(approval, DANA, Decision.APPROVE).accepted
    h.work()
    assert h.calls["issue_refund"] == 0
    assert h.approvals.decide(approval, OMAR, Decision.APPROVE).accepted
    h.work()
    assert h.calls["issue_refund"] == 1


def test_a_vote_counts_only_for_the_arguments_it_was_cast_on() -> None:
    """After an edit, an approval given with the old arguments' hash is refused as stale."""
    h = AgentHarness(
        [REFUND, DONE], policy=ApprovalPolicy(approvers=("U_DANA", "U_OMAR"), required=2)
    )
    run_id = _until_waiting(h)
    (approval,) = h.pending(run_id)
    shown = h.approvals.get(approval).proposed_hash
    assert h.approvals.decide(approval, DANA, Decision.APPROVE, seen_hash=shown).accepted
    edited = {"order_id": "1045", "amount_cents": 89900}
    assert h.approvals.decide(
        approval, OMAR, Decision.EDIT, edited_args=edited, seen_hash=shown
    ).accepted
    stale = h.approvals.decide(approval, DANA, Decision.APPROVE, seen_hash=shown)
    assert (stale.accepted, stale.refused_as) == (False, "stale")
    assert h.approvals.get(approval).status == ApprovalStatus.PENDING
    h.work()
    assert h.calls["issue_refund"] == 0
    fresh = h.approvals.get(approval).proposed_hash
    assert h.approvals.decide(approval, DANA, Decision.APPROVE, seen_hash=fresh).accepted
    h.work()
    assert h.calls["issue_refund"] == 1
    assert json.loads(h.tool_results(run_id)[0])["refunded"] == 89900


def test_parallel_calls_are_decided_independently() -> None:
    """Two side-effecting calls in one turn wait together; rejecting one does not stop the other."""
    h = AgentHarness([BOTH, DONE])
    run_id = _until_waiting(h)
    refund, email = h.pending(run_id)
    h.approvals.decide(email, OMAR, Decision.REJECT, reason="no emails today")
    h.work()
    assert h.run(run_id).status == RunStatus.WAITING
    h.approvals.decide(refund, DANA, Decision.APPROVE)
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    assert (h.calls["issue_refund"], h.calls["send_email"]) == (1, 0)


def test_deadline_expires_fail_closed_and_late_click_loses() -> None:
    """Past its deadline the sweep rejects the approval; a click after that cannot win."""
    h = AgentHarness(
        [REFUND, DONE], policy=ApprovalPolicy(approvers=("U_DANA",), deadline=timedelta(minutes=30))
    )
    run_id = _until_waiting(h)
    (approval,) = h.pending(run_id)
    assert isinstance(h.clock, FrozenClock)
    h.clock.advance(timedelta(minutes=30))
    assert not h.approvals.decide(approval, DANA, Decision.APPROVE).accepted
    h.work()
    assert h.approvals.get(approval).status == ApprovalStatus.EXPIRED
    assert h.calls["issue_refund"] == 0
    assert h.tool_results(run_id)[0].startswith("not executed: expired")


def test_escalation_hands_the_approval_to_others() -> None:
    """With escalation the overdue approval goes to the escalation list for another deadline."""
    policy = ApprovalPolicy(
        approvers=("U_DANA",),
        deadline=timedelta(minutes=10),
        on_expiry=OnExpiry.ESCALATE,
        escalate_to=("U_OMAR",),
    )
    h = AgentHarness([REFUND, DONE], policy=policy)
    (approval,) = h.pending(_until_waiting(h))
    h.clock.advance(timedelta(minutes=10))
    assert [a.id for a in h.approvals.sweep().escalated] == [approval]
    assert not h.approvals.decide(approval, DANA, Decision.APPROVE).accepted
    assert h.approvals.decide(approval, OMAR, Decision.APPROVE).accepted


def test_reminders_come_due_at_their_interval() -> None:
    """A policy with reminders yields a reminder each interval while pending."""
    policy = ApprovalPolicy(approvers=("U_DANA",), remind_every=timedelta(minutes=15))
    h = AgentHarness([REFUND, DONE], policy=policy)
    _until_waiting(h)
    assert h.approvals.sweep().reminded == []
    h.clock.advance(timedelta(minutes=15))
    assert len(h.approvals.sweep().reminded) == 1
    assert h.approvals.sweep().reminded == []


def test_changed_policy_makes_the_approval_stale() -> None:
    """If the tool's policy changes while it waits, the approval is stale and cannot be approved."""
    h = AgentHarness([REFUND, DONE])
    (approval,) = h.pending(_until_waiting(h))
    changed = AgentHarness([REFUND, DONE], policy=ApprovalPolicy(approvers=("U_DANA",)))
    lookup = tool_lookup(Agents(changed.agent))
    result = Approvals(h.approval_store, h.clock, lookup).decide(approval, DANA, Decision.APPROVE)
    assert not result.accepted
    assert "stale" in result.message
    assert "reject it" in result.message


def test_a_stale_approval_can_still_be_rejected_and_the_run_goes_on() -> None:
    """A rejection is never stale: after a deploy changed the tool's policy, the waiting
    call can be rejected (it was refused both ways, leaving the run waiting to its deadline),
    and the run goes on without it."""
    h = AgentHarness([REFUND, DONE])
    run_id = _until_waiting(h)
    (approval,) = h.pending(run_id)
    changed = AgentHarness([REFUND, DONE], policy=ApprovalPolicy(approvers=("U_DANA",)))
    deployed = Approvals(h.approval_store, h.clock, tool_lookup(Agents(changed.agent)))
    result = deployed.decide(approval, DANA, Decision.REJECT, reason="policy changed")
    assert result.accepted, result.message
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    assert h.calls["issue_refund"] == 0


def test_invalid_arguments_go_back_to_the_model() -> None:
    """Arguments that fail the schema never reach the tool; the model reads the errors."""
    bad = tool_reply(
        ToolCall(id="c9", name="issue_refund", arguments={"order_id": 1042, "amount_cents": 1})
    )
    h = AgentHarness([bad, DONE])
    run_id = h.start()
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    assert h.pending(run_id) == []
    assert h.tool_results(run_id)[0].startswith("invalid arguments: order_id: 1042 is not of type")


@pytest.mark.parametrize(
    "outcome", [UnknownOutcome.RETRY, UnknownOutcome.VERIFY, UnknownOutcome.ASK]
)
def test_unknown_outcome_follows_the_tool_policy(outcome: UnknownOutcome) -> None:
    """A side effect started but never journaled is retried with its key, verified, or asked."""
    h = AgentHarness([REFUND, DONE], outcome=outcome)
    run_id, _ = h.refund_cut_off_by_a_crash()
    if outcome == UnknownOutcome.ASK:
        (question,) = h.pending(run_id)
        assert "Did it happen?" in h.approvals.get(question).reason_asked
        h.approvals.decide(question, DANA, Decision.APPROVE)
        h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    expected_runs = 2 if outcome == UnknownOutcome.RETRY else 1
    assert h.calls["issue_refund"] == expected_runs
    assert len(set(h.keys)) == 1


def test_budget_caps_output_tokens_and_stops_before_crossing() -> None:
    """The model gets at most the tokens left, and a call that cannot fit is never made."""
    h = AgentHarness([LOOKUP, LOOKUP, LOOKUP, DONE], budget=Budget(model_calls=2))
    run_id = h.start()
    h.work()
    run = h.run(run_id)
    [asked] = h.env.pending(run_id)
    assert (run.status, run.wait_key) == (RunStatus.WAITING, f"approval:{asked.id}")
    assert asked.kind == ApprovalKind.BUDGET
    assert h.model.calls == 2
    capped = AgentHarness([DONE], budget=Budget(tokens=600))
    capped_id = capped.start()
    capped.work()
    assert capped.model.requests[0].max_output_tokens < 600
    assert capped.run(capped_id).status == RunStatus.COMPLETED


def test_input_estimate_keeps_its_formula_while_measuring_each_message_once() -> None:
    """The incremental estimate equals the formula journaled caps were computed with."""
    tools = [ToolSpec(name="t", description="d ü", parameters={"type": "object"})]
    estimate = InputEstimate("be careful", tools)
    messages = [Message(role="user", content="refund order 1042 — ünïcode")]
    for turn in range(5):
        expected = (
            len("be careful")
            + sum(len(json.dumps(m.to_json())) for m in messages)
            + sum(len(json.dumps(t.to_json())) for t in tools)
        ) // 4 + 1
        assert estimate.tokens(messages) == expected
        messages += [LOOKUP.message, Message(role="tool", tool_call_id="c1", content=f"r{turn}")]


def test_cancelling_a_run_closes_its_pending_approvals() -> None:
    """Runtime.cancel alone leaves no approval of the cancelled run pending."""
    h = AgentHarness([BOTH, DONE])
    run_id = _until_waiting(h)
    assert len(h.pending(run_id)) == 2
    h.runtime.cancel(run_id)
    assert h.pending(run_id) == []
    closed = h.approval_store.list_approvals(run_id=run_id)
    assert {(a.status, a.reason) for a in closed} == {
        (ApprovalStatus.CANCELLED, "the run was cancelled")
    }
