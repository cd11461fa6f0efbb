"""Evals count approvals: asked, rejected in the recording, and argument fields away from
what approvers signed, over a hand-built recording."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_runtime.approvals import Actor, Approval, ApprovalKind, ApprovalStatus, args_hash
from agent_runtime.budget import Consumption
from agent_runtime.eval_approvals import ApprovalCounts, approval_counts
from agent_runtime.evals import Call, Comparison, EvalReport, Trajectory, calls_of
from agent_runtime.models.base import Message, ToolCall
from agent_runtime.policy import PolicySnapshot
from bot.cli.eval_report import render_html

START = datetime(2026, 11, 1, tzinfo=UTC)
DANA = Actor(user_id="U_DANA", name="dana")
GATED = {"refund", "send_email"}
EMAIL = {"to": "dana@example.com", "body": "refunded"}


def _approval(
    n: int,
    tool: str,
    args: dict[str, Any],
    status: ApprovalStatus,
    *,
    signed: dict[str, Any] | None = None,
    by: Actor = DANA,
) -> Approval:
    at = START + timedelta(minutes=n)
    return Approval(
        id=f"{n:024x}",  # type: ignore[arg-type]
        run_id="0" * 32,
        position=n,
        kind=ApprovalKind.TOOL_CALL,
        tool=tool,
        args=args,
        args_hash=args_hash(args),
        fingerprint="f",
        policy=PolicySnapshot(),
        requester=Actor(user_id="U_REQ"),
        requested_at=at,
        deadline=at + timedelta(hours=1),
        status=status,
        decided_by=by,
        decided_at=at,
        decided_args=(signed or args) if status == ApprovalStatus.APPROVED else None,
        reason="duplicate" if status == ApprovalStatus.REJECTED else None,
    )


RECORDED_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("lookup", {"email": "dana@example.com"}),
    ("refund", {"order": "1042", "amount": 4999}),
    ("refund", {"order": "1043", "amount": 100}),
    ("send_email", EMAIL),
    ("refund", {"order": "1044", "amount": 50}),
]
DECIDED = [  # newest first, as the store lists them
    _approval(
        5,
        "refund",
        {"order": "1044", "amount": 50},
        ApprovalStatus.APPROVED,
        by=Actor(user_id="rule:small", name="rule:small"),
    ),
    _approval(4, "send_email", EMAIL, ApprovalStatus.APPROVED),
    _approval(3, "refund", {"order": "1043", "amount": 100}, ApprovalStatus.REJECTED),
    _approval(
        2,
        "refund",
        {"order": "1042", "amount": 4999},
        ApprovalStatus.APPROVED,
        signed={"order": "1042", "amount": 2500},
    ),
]


def _recorded() -> list[Call]:
    messages = []
    for n, (tool, args) in enumerate(RECORDED_CALLS):
        call = ToolCall(id=f"c{n}", name=tool, arguments=args)
        messages += [
            Message(role="assistant", tool_calls=(call,)),
            Message(role="tool", tool_call_id=f"c{n}", content="ok"),
        ]
    return calls_of(messages, DECIDED)


def _candidate(recorded: list[Call]) -> list[Call]:
    """The same lookup; the refund as Dana signed it; the rejected refund again; the email
    with another body; no third refund."""
    return [
        recorded[0],
        Call("refund", {"order": "1042", "amount": 2500}, "not replayed", True, replayed=False),
        recorded[2],
        Call("send_email", {**EMAIL, "body": "sorry"}, "not replayed", True, replayed=False),
    ]


def test_counts_match_the_hand_built_recording() -> None:
    """3 approvals asked; 1 call people rejected; 1 field from the 2 signed calls it meets,
    where the recorded model was 1 field off (Dana's edit of the amount)."""
    recorded = _recorded()
    counts = approval_counts(lambda name: name in GATED, recorded, _candidate(recorded))
    assert counts == ApprovalCounts(
        triggered=3,
        rejected_in_recording=1,
        signed_compared=2,
        fields_from_signed=1,
        recorded_fields_from_signed=1,
    )


def test_a_rule_rejection_is_not_counted_as_people_rejecting() -> None:
    """A call rejected by rule:<id> in the recording is not a person's rejection."""
    by_rule = replace(DECIDED[2], decided_by=Actor(user_id="rule:deny", name="rule:deny"))
    messages = [
        Message(
            role="assistant", tool_calls=(ToolCall(id="c", name="refund", arguments=by_rule.args),)
        ),
        Message(role="tool", tool_call_id="c", content="not executed"),
    ]
    recorded = calls_of(messages, [by_rule])
    assert approval_counts(lambda n: True, recorded, recorded).rejected_in_recording == 0


def test_the_json_and_html_reports_carry_the_counts_per_run_and_summed() -> None:
    """Each run's JSON has its counts; the summary sums them; the HTML page shows them."""
    recorded = _recorded()
    counts = approval_counts(lambda name: name in GATED, recorded, _candidate(recorded))
    trajectory = Trajectory(calls=recorded, answer="done", ended="answered", used=Consumption())
    comparison = Comparison("r1", "task", trajectory, trajectory, [], counts)
    report = EvalReport("candidate", [comparison, comparison])
    data = report.to_json()
    assert data["runs"][0]["approvals"]["triggered"] == 3
    assert data["summary"]["approvals"] == (counts + counts).to_json()
    html = render_html(report)
    assert "approvals it would ask for</th><td>6<" in html
    assert "its calls people rejected in the recording</th><td>2<" in html
    assert "2 over 4 signed calls (recorded model: 2)" in html
