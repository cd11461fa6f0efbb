"""Readers for Slack scenario tests: what a message, an answer or the outbox says."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, select, text

from agent_runtime import Approval, ApprovalStatus, RunId
from bot.slack import blocks
from devkit.sandbox.slack_api import EphemeralMessage, Message
from store.models import outbox

if TYPE_CHECKING:
    from tests.integration.slack_harness import (
        Ack,
        BotInstance,
        SlackWorld,
    )

LEGIT_MARKUP = re.compile(r"^<@U_[A-Z]+>$")
"""Markup the bot writes itself: mentions of the scenarios' people."""
DATE_MARKUP = re.compile(r"^<!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>|]+>$")
"""Markup the bot writes itself: a moment shown in each reader's time zone."""


def raw_installations(engine: Engine) -> dict[str, str]:
    """Each installation's row as stored, by team id: the JSON text itself."""
    query = text("SELECT team_id, CAST(data AS TEXT) FROM slack_installations")
    with engine.connect() as conn:
        return {team: data for team, data in conn.execute(query)}


def run_id_of(ack: Ack) -> RunId:
    """Return the run id in a ``Started run `…``` answer."""
    found = re.search(r"Started run `([0-9a-f]{32})`", ack.text)
    assert found, f"no run started: {ack.text!r}"
    return RunId(found.group(1))


def find_button(message: Message | EphemeralMessage, action_id: str) -> dict[str, Any]:
    """Return the button ``action_id`` of ``message`` (in an actions block or a section's
    accessory) with its ``block_id``."""
    for block in message.blocks or []:
        elements = (
            block.get("elements", [])
            if block.get("type") == "actions"
            else [block.get("accessory") or {}]
        )
        for element in elements:
            if element.get("action_id") == action_id:
                return {**element, "block_id": block.get("block_id", "")}
    raise AssertionError(f"no {action_id} button on message: {message.text!r}")


def buttons(message: Message) -> list[tuple[str, str]]:
    """Return the (action_id, value) of every button on ``message``."""
    return [
        (e["action_id"], e.get("value", ""))
        for b in message.blocks or []
        if b.get("type") == "actions"
        for e in b["elements"]
    ]


def is_card_of(message: Message, approval_id: str) -> bool:
    """Tell whether ``message`` is the card of ``approval_id`` (pending or decided)."""
    rendered = json.dumps(message.blocks or [])
    return f"approval:{approval_id}" in rendered or f"approval `{approval_id}`" in rendered


def block_texts(message: Message) -> str:
    """Return every text in ``message``'s blocks, joined by newlines."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            text = node.get("text")
            if isinstance(text, str):
                found.append(text)
            for value in node.values():
                if isinstance(value, dict | list):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(message.blocks or [])
    return "\n".join(found)


def preformatted_text(message: Message) -> str:
    """Return the text of the first ``rich_text_preformatted`` block of ``message``."""
    for block in message.blocks or []:
        if block.get("type") == "rich_text":
            for element in block["elements"]:
                if element.get("type") == "rich_text_preformatted":
                    return "".join(e.get("text", "") for e in element["elements"])
    raise AssertionError(f"no preformatted block on {message.ts}")


def unescaped_markup(texts: Iterable[str], allowed: Iterable[str] | None = None) -> list[str]:
    """Return the ``<…>`` markup in ``texts`` other than dates and ``allowed`` (by default the
    mentions of the scenario's people, which the bot writes itself)."""
    permitted = set(allowed) if allowed is not None else None
    return [
        m
        for text in texts
        for m in re.findall(r"<[^<>]*>", text)
        if not (
            DATE_MARKUP.match(m)
            or (m in permitted if permitted is not None else LEGIT_MARKUP.match(m))
        )
    ]


def approvals_of(
    bot: BotInstance, run_id: str, status: ApprovalStatus | None = None
) -> dict[str, Approval]:
    """Return the run's approvals (with ``status``, if given) by tool name."""
    found = bot.services.approvals.store.list_approvals(run_id=run_id, status=status)
    return {a.tool: a for a in found}


def asked_in_order(bot: BotInstance, run_id: str) -> list[Approval]:
    """Return the run's approvals in the order they were asked."""
    found = bot.services.approvals.store.list_approvals(run_id=run_id)
    return sorted(found, key=lambda a: a.position)


def outbox_rows(bot: BotInstance) -> list[dict[str, Any]]:
    """Return the outbox, oldest first."""
    with bot.services.store.engine.connect() as conn:
        rows = conn.execute(select(outbox).order_by(outbox.c.id)).mappings().all()
    return [dict(row) for row in rows]


def posts_per_message(world: SlackWorld) -> dict[tuple[str, str, str, str], int]:
    """Count the successful ``chat.postMessage`` calls for each distinct message.

    A message is its channel, thread, text and blocks (the blocks name the run or approval,
    so equal texts in different threads or cards stay apart).
    """
    counts: dict[tuple[str, str, str, str], int] = {}
    for call in world.successful("chat.postMessage"):
        key = (
            str(call.params.get("channel")),
            str(call.params.get("thread_ts") or ""),
            str(call.params.get("text") or ""),
            json.dumps(call.params.get("blocks"), sort_keys=True),
        )
        counts[key] = counts.get(key, 0) + 1
    return counts


def canonical_args(args: dict[str, Any]) -> str:
    """Return the arguments as the card and the edit modal show them."""
    return blocks.canonical(args)
