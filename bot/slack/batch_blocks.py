"""The message that gathers one model turn's approvals: "Approve all (N)" / "Reject all".

Each button carries every call's approval id (Approve all also the hash of the arguments the
card showed), so a batch decides exactly the calls people saw, each one separately.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_runtime import Approval
from agent_runtime.batches import BATCH_LIMIT
from bot.slack.blocks import (
    PLAIN_TEXT_INPUT_LIMIT,
    Block,
    approval_ref,
    button,
    context,
    plain,
    section,
)
from bot.slack.preview_blocks import preview_line
from bot.slack.text import message, tool_name, user

APPROVE_ALL, REJECT_ALL, REJECT_ALL_SUBMIT = (
    "batch.approve_all",
    "batch.reject_all",
    "batch.reject_all_submit",
)
SEPARATOR = ","
PREVIEW_CHARS = 80
"""How much of each call's preview the batch shows (its own card shows all of it)."""


def batch_card(before: int, approvals: Sequence[Approval]) -> tuple[str, list[Block]]:
    """The batch message of the turn whose approvals end just before step ``before``."""
    count = len(approvals)
    lines = [
        f"{i}. *{tool_name(a.tool)}*{_said(a)} · args sha256 `{a.proposed_hash[:12]}` · approvers "
        + (", ".join(user(u) for u in a.eligible) or "nobody")
        for i, a in enumerate(approvals, 1)
    ]
    blocks: list[Block] = [
        section(f"*{count} calls from one model turn wait for sign-off:*\n" + "\n".join(lines)),
        context(
            "Each call is still decided, hashed and audited on its own; the buttons decide "
            "all of them for someone allowed to decide every one."
        ),
        {
            "type": "actions",
            "block_id": f"batch:{before}",
            "elements": [
                button(
                    f"Approve all ({count})",
                    APPROVE_ALL,
                    SEPARATOR.join(approval_ref(a) for a in approvals),
                    style="primary",
                ),
                button(
                    "Reject all",
                    REJECT_ALL,
                    SEPARATOR.join(a.id for a in approvals),
                    style="danger",
                ),
            ],
        },
    ]
    return message(f"{count} calls from one model turn wait for sign-off"), blocks


def _said(approval: Approval) -> str:
    """What the call would do, as its preview says (empty without one)."""
    line = preview_line(approval, PREVIEW_CHARS)
    return f": {line}" if line else ""


def parse_batch(value: str) -> list[str]:
    """Return the approval references a batch button carries."""
    return [ref for ref in value.split(SEPARATOR) if ref][:BATCH_LIMIT]


def reject_all_modal(approval_ids: Sequence[str]) -> dict[str, Any]:
    """The modal asking for the reason that rejects every call of a batch."""
    return {
        "type": "modal",
        "callback_id": REJECT_ALL_SUBMIT,
        "private_metadata": SEPARATOR.join(approval_ids),
        "title": plain("Reject all", 24),
        "submit": plain("Reject all", 24),
        "close": plain("Cancel", 24),
        "blocks": [
            section(f"Reject the {len(approval_ids)} calls of this turn."),
            {
                "type": "input",
                "block_id": "reason",
                "label": plain("Why? The agent reads this for each call."),
                "element": {
                    "type": "plain_text_input",
                    "action_id": "value",
                    "multiline": True,
                    "max_length": PLAIN_TEXT_INPUT_LIMIT,
                },
            },
        ],
    }
