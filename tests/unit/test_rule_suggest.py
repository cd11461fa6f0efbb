"""``rules suggest``'s mining: the widest argument range people only ever approved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agent_runtime.approvals import Actor, Approval, ApprovalKind, ApprovalStatus, args_hash
from agent_runtime.policy import PolicySnapshot
from agent_runtime.rule_suggest import suggest
from agent_runtime.rules import RuleContext, RuleMode

START = datetime(2026, 11, 1, tzinfo=UTC)
DANA = Actor(user_id="U_DANA", name="dana")


def _approval(
    n: int, status: ApprovalStatus, args: dict[str, Any], *, tool: str = "refund", by: Actor = DANA
) -> Approval:
    at = START + timedelta(hours=n)
    return Approval(
        id=f"{n:024x}",  # type: ignore[arg-type]
        run_id=f"{n:032x}",
        position=1,
        kind=ApprovalKind.TOOL_CALL,
        tool=tool,
        args=args,
        args_hash=args_hash(args),
        fingerprint="f",
        policy=PolicySnapshot(approvers=("U_DANA",)),
        requester=Actor(user_id="U_REQ"),
        requested_at=at,
        deadline=at + timedelta(hours=1),
        status=status,
        decided_by=None if status in (ApprovalStatus.PENDING, ApprovalStatus.EXPIRED) else by,
        decided_at=None if status == ApprovalStatus.PENDING else at,
        reason="no" if status == ApprovalStatus.REJECTED else None,
    )


APPROVED, REJECTED = ApprovalStatus.APPROVED, ApprovalStatus.REJECTED
HISTORY = [
    _approval(1, ApprovalStatus.EXPIRED, {"amount": 50, "order": "a"}),
    _approval(2, APPROVED, {"amount": 100, "order": "b"}),
    _approval(3, APPROVED, {"amount": 200, "order": "c"}),
    _approval(4, APPROVED, {"amount": 300, "order": "d"}),
    _approval(5, APPROVED, {"amount": 250, "order": "e"}, by=Actor(user_id="grant:g1")),
    _approval(6, REJECTED, {"amount": 350, "order": "f"}),
    _approval(7, APPROVED, {"amount": 400, "order": "g"}),
    _approval(8, ApprovalStatus.PENDING, {"amount": 120, "order": "h"}),
    _approval(9, APPROVED, {"to": "a@example.com"}, tool="send_email"),
    _approval(10, APPROVED, {"to": "b@example.com"}, tool="send_email"),
    _approval(11, APPROVED, {"to": "c@example.com"}, tool="send_email"),
]


def _context(approval: Approval) -> RuleContext:
    return RuleContext(requester=approval.requester.user_id)


def test_suggests_the_widest_range_people_only_approved_with_its_replay() -> None:
    """Amounts 100-300 (three approvals; the grant's and the pending call's do not count as
    decisions) are suggested in shadow mode; its replay overturns no rejection."""
    (found,) = suggest(HISTORY, _context)
    assert found.covers == 3
    assert found.rule.mode == RuleMode.SHADOW
    assert found.rule.to_json()["when"] == {
        "all": [
            {"field": "args.amount", "op": ">=", "value": 100},
            {"field": "args.amount", "op": "<=", "value": 300},
        ]
    }
    report = found.replayed
    assert (report.approvals, report.auto_approved, report.left_to_people) == (11, 5, 6)
    assert report.approved_but_rejected == []


def test_a_range_needs_enough_approvals() -> None:
    """With a higher minimum nothing is suggested; with a lower one, still only the widest
    range of each argument (not 400 alone)."""
    assert suggest(HISTORY, _context, min_support=4) == []
    ranges = [
        s.rule.to_json()["when"]["all"][0]["value"]
        for s in suggest(HISTORY, _context, min_support=1)
    ]
    assert ranges == [100]
