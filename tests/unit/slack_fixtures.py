"""Approvals in every state, and hostile text, for rendering tests that need no Slack."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_runtime import Actor, Approval, ApprovalStatus
from agent_runtime.approvals import ApprovalId, ApprovalKind, args_hash
from agent_runtime.policy import PolicySnapshot
from bot.slack.text import is_hiding

ASKED = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
DANA, OMAR, ALEX = Actor(user_id="U_DANA"), Actor(user_id="U_OMAR"), Actor(user_id="U_ALEX")
SPOOF = "refund to \u202eexample.com@evil"
"""Shows as "refund to live@moc.elpmaxe" where Slack honours the override."""
HIDDEN = "a\u200bb\u2066c\u2069d\ufeffe\u2028f\x07g\x85h\U000e0041"
LONG_NAME = "issue_refund_" + "x" * 5000
HOSTILE = {
    "to": SPOOF,
    "note": "*bold* _it_ ~s~ `code` <!channel> <@U_EVIL> <https://evil|bank>",
    "invisible": HIDDEN,
    "amp": "R&D " * 400,
    "rtl": "\u05e9\u05dc\u05d5\u05dd \u202b\u202c",
    "blob": "y" * 50_000,
}


def approval(
    tool: str = "issue_refund", args: dict[str, Any] | None = None, **changes: Any
) -> Approval:
    """A pending approval of ``tool`` with ``args``; ``changes`` set any other field."""
    args = {"order_id": "1042", "amount_cents": 4999} if args is None else args
    asked = Approval(
        id=ApprovalId("a" * 24),
        run_id="r1",
        position=3,
        kind=ApprovalKind.TOOL_CALL,
        tool=tool,
        args=args,
        args_hash=args_hash(args),
        fingerprint="f",
        requester=ALEX,
        policy=PolicySnapshot(
            approvers=(DANA.user_id, OMAR.user_id), required=2, escalate_to=("U_BOSS",)
        ),
        requested_at=ASKED,
        deadline=ASKED + timedelta(hours=4),
        reason_asked="",
    )
    return dataclasses.replace(asked, **changes)


def edited(base: Approval, new_args: dict[str, Any]) -> Approval:
    """``base`` after an edit to ``new_args`` and one vote on them."""
    digest = args_hash(new_args)
    return dataclasses.replace(
        base,
        decided_args=new_args,
        decided_args_hash=digest,
        diff=[{"field": k, "from": base.args.get(k), "to": v} for k, v in new_args.items()],
        approvals=({**DANA.to_json(), "at": ASKED.isoformat(), "args_hash": digest},),
    )


def decided(
    base: Approval, status: ApprovalStatus, by: Actor | None = DANA, reason: str | None = None
) -> Approval:
    """``base`` decided with ``status`` an hour after it was asked."""
    return dataclasses.replace(
        base, status=status, decided_by=by, decided_at=ASKED + timedelta(hours=1), reason=reason
    )


def strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON-like value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def hidden_in(value: Any) -> list[str]:
    """The invisible or direction-changing characters left in ``value``'s strings."""
    return [f"U+{ord(c):04X}" for s in strings(value) for c in s if is_hiding(c)]
