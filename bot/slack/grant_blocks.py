"""Block Kit for grants: the 24-hour modal and the grant's message (the card's grant buttons
are in ``bot.slack.blocks``)."""

from __future__ import annotations

import json
from typing import Any

from agent_runtime.grants import Grant, GrantScope, describe
from bot.slack.blocks import (
    PLAIN_TEXT_INPUT_LIMIT,
    Block,
    button,
    context,
    plain,
    section,
)
from bot.slack.text import date, message, shown, tool_name, user

GRANT_REVOKE = "grant.revoke"
DAY_SUBMIT = "grant.day_submit"
SCOPES = {GrantScope.RUN: "for this run", GrantScope.DAY: "for 24 hours, in every run"}


def day_modal(offer: Grant, ref: str) -> dict[str, Any]:
    """The modal showing, before it is made, what a 24-hour grant would allow (editable)."""
    predicate = json.dumps(offer.when.to_json(), indent=2, ensure_ascii=False)
    fits = len(predicate) <= PLAIN_TEXT_INPUT_LIMIT
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": "value",
        "multiline": True,
        "max_length": PLAIN_TEXT_INPUT_LIMIT,
    }
    if fits:
        element["initial_value"] = predicate
    return {
        "type": "modal",
        "callback_id": DAY_SUBMIT,
        "private_metadata": ref,
        "title": plain("Allow for 24 hours", 24),
        "submit": plain("Approve and allow", 24),
        "close": plain("Cancel", 24),
        "blocks": [
            section(
                f"Approve this call of *{tool_name(offer.tool)}* and, until "
                f"{date(offer.expires_at)}, every call of it in any run whose arguments "
                f"match: *{shown(describe(offer.when), 1500)}*"
            ),
            context(
                "Each call it approves is recorded as decided by this grant, on your behalf. "
                "Narrow the predicate below if you like; revoke the grant at any time."
            ),
            {
                "type": "input",
                "block_id": "predicate",
                "label": plain("Predicate (JSON)"),
                "element": element,
            },
        ],
    }


def grant_message(grant: Grant) -> tuple[str, list[Block]]:
    """The grant's message in the thread: who allowed what, until when; Revoke while active."""
    what = f"similar calls of *{tool_name(grant.tool)}* {SCOPES[grant.scope]}"
    line = (
        f"🔓 {user(grant.granted_by.user_id)} allowed {what} until {date(grant.expires_at)}: "
        f"{shown(describe(grant.when), 1500)}"
    )
    if grant.revoked_at is not None:
        who = "" if grant.revoked_by is None else f" by {user(grant.revoked_by.user_id)}"
        line = f"~{line}~\n🔒 Revoked{who} at {date(grant.revoked_at)}"
    blocks: list[Block] = [section(line), context(f"grant `{grant.id}`")]
    if grant.revoked_at is None:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"grant:{grant.id}",
                "elements": [button("Revoke", GRANT_REVOKE, grant.id, style="danger")],
            }
        )
    return message(line), blocks
