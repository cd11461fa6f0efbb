"""Batches: the approvals of one model turn, decided all at once yet each on its own."""

from __future__ import annotations

from typing import Any

from agent_runtime import (
    Actor,
    Agent,
    ApprovalPolicy,
    ApprovalStatus,
    Decision,
    RunId,
    Tools,
    tool,
)
from agent_runtime.batches import pending_batch, turn_approvals
from agent_runtime.models import ScriptedModel, ToolCall, tool_reply
from agent_runtime.testing import AgentEnvironment
from bot.slack.batch_blocks import APPROVE_ALL, REJECT_ALL, batch_card, parse_batch
from bot.slack.batch_decisions import approve_batch, reject_batch
from tests.unit.agent_harness import BOTH, DONE, LOOKUP, REFUND, REQUESTER, AgentHarness

DANA, OMAR = Actor(user_id="U_DANA"), Actor(user_id="U_OMAR")
REFUND_1043 = ToolCall(
    id="c4", name="issue_refund", arguments={"order_id": "1043", "amount_cents": 12900}
)


def two_policies(required: int = 1, mailers: tuple[str, ...] = ("U_DANA",)) -> AgentEnvironment:
    """An agent whose refund Dana or Omar may approve (``required`` of them), and whose email
    ``mailers`` may."""

    def issue_refund(order_id: str, amount_cents: int) -> dict[str, Any]:
        """Refund an order."""
        return {"refunded": amount_cents}

    def send_email(to: str, body: str) -> str:
        """Email a customer."""
        return "sent"

    both = ApprovalPolicy(approvers=("U_DANA", "U_OMAR"), required=required)
    tools = Tools(
        tool(side_effect=True, approval=both)(issue_refund),
        tool(side_effect=True, approval=ApprovalPolicy(approvers=mailers, required=required))(
            send_email
        ),
    )
    model = ScriptedModel([BOTH, DONE], name="scripted")
    return AgentEnvironment(Agent(name="t", model=model, system_prompt="careful", tools=tools))


def asked(env: AgentEnvironment) -> tuple[RunId, list[Any]]:
    """Start a run, run it to its approvals, and return them in the order asked."""
    run_id = env.start("refund 1042 and email", requester=REQUESTER)
    env.run_until_waiting(run_id)
    return run_id, env.pending(run_id)


def test_a_turns_approvals_are_found_together_and_only_that_turns() -> None:
    """The batch of a turn is its gated calls, in order; a turn of one call is no batch."""
    harness = AgentHarness([LOOKUP, REFUND, tool_reply(*BOTH.message.tool_calls, REFUND_1043)])
    run_id = harness.start()
    harness.work()
    [single] = harness.env.pending(run_id)
    harness.env.approve(single, as_user=DANA)
    harness.work()
    journal = harness.runtime.journal(run_id)
    marks = [s.position for s in journal if s.name == "tools.as_decided"]
    first = turn_approvals(harness.approval_store, run_id, journal, marks[0])
    assert [a.id for a in first] == [single.id]
    batch = pending_batch(harness.approval_store, run_id, journal, marks[1])
    assert [(a.tool, a.args.get("order_id")) for a in batch] == [
        ("issue_refund", "1042"),
        ("send_email", None),
        ("issue_refund", "1043"),
    ]


def test_approve_all_decides_each_call_for_the_hash_its_card_showed() -> None:
    """Each call is approved on its own, for its own shown hash, and audited on its own."""
    env = two_policies()
    run_id, batch = asked(env)
    _, body = batch_card(9, batch)
    refs = parse_batch(body[-1]["elements"][0]["value"])
    assert body[-1]["elements"][0]["action_id"] == APPROVE_ALL
    assert refs == [f"{a.id}:{a.args_hash}" for a in batch]

    outcome = approve_batch(env.approvals, [(a, a.args_hash) for a in batch], DANA)

    assert [m for _, m in outcome.refused] == []
    assert [a.id for a, _ in outcome.decided] == [a.id for a in batch]
    entries, _ = env.approval_store.audit_log()
    for approval in batch:
        decided = env.approvals.get(approval.id)
        assert decided.status == ApprovalStatus.APPROVED
        assert decided.decided_args_hash == approval.args_hash
        assert [e.action for e in entries if e.approval_id == approval.id] == [
            "requested",
            "approve",
        ]
    env.run_until_waiting(run_id)
    assert [c.tool for c in env.tool_calls] == ["issue_refund", "send_email"]


def test_someone_not_allowed_to_decide_one_call_decides_none() -> None:
    """Omar may approve the refund but not the email: Approve all decides nothing, and his
    attempt on the email is recorded as unauthorized."""
    env = two_policies()
    _, batch = asked(env)

    outcome = approve_batch(env.approvals, [(a, a.args_hash) for a in batch], OMAR)

    assert outcome.decided == []
    assert [a.tool for a, _ in outcome.refused] == ["send_email"]
    assert all(env.approvals.get(a.id).status == ApprovalStatus.PENDING for a in batch)
    entries, _ = env.approval_store.audit_log()
    assert [(e.approval_id, e.action) for e in entries if e.action == "unauthorized"] == [
        (batch[1].id, "unauthorized")
    ]
    assert "Nothing was recorded" in outcome.summary()
    assert reject_batch(env.approvals, batch, OMAR, "no").decided == []


def test_a_call_whose_arguments_changed_since_shown_is_refused_alone() -> None:
    """Under a quorum of two, an edit after the batch was shown makes that call's hash stale:
    Approve all refuses it and still approves the other call."""
    env = two_policies(required=2, mailers=("U_DANA", "U_OMAR"))
    _, batch = asked(env)
    refund, email = batch
    edited = {"order_id": "1042", "amount_cents": 1000}
    assert env.approvals.decide(
        refund.id, DANA, Decision.EDIT, edited_args=edited, seen_hash=refund.args_hash
    ).accepted

    outcome = approve_batch(env.approvals, [(a, a.args_hash) for a in batch], OMAR)

    assert [a.id for a, _ in outcome.refused] == [refund.id]
    assert [a.id for a, _ in outcome.decided] == [email.id]
    assert [v["user_id"] for v in env.approvals.get(refund.id).approvals] == ["U_DANA"]
    assert [v["user_id"] for v in env.approvals.get(email.id).approvals] == ["U_OMAR"]
    assert "not recorded" in outcome.summary()


def test_reject_all_rejects_each_call_with_the_reason() -> None:
    """Reject all records one rejection per call, each with the reason the agent then reads."""
    env = two_policies()
    run_id, batch = asked(env)
    _, body = batch_card(9, batch)
    assert body[-1]["elements"][1]["action_id"] == REJECT_ALL
    assert parse_batch(body[-1]["elements"][1]["value"]) == [a.id for a in batch]

    outcome = reject_batch(env.approvals, batch, DANA, "not today")

    assert len(outcome.decided) == 2
    for approval in batch:
        rejected = env.approvals.get(approval.id)
        assert (rejected.status, rejected.reason) == (ApprovalStatus.REJECTED, "not today")
    env.run_until_waiting(run_id)
    assert env.tool_calls == []
