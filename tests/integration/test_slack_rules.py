"""A rule's decision in Slack: the card says which rule decided, and the run goes on."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import ApprovalStatus
from agent_runtime.rules import Rules
from tests.integration.slack_harness import (
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import approvals_of, block_texts, buttons
from tests.integration.slack_steps import (
    start_refund_run,
)

RULES = Rules.parse(
    [
        {
            "id": "small-refunds",
            "tool": "issue_refund",
            "action": "auto_approve",
            "when": [{"field": "args.amount_cents", "op": "<=", "value": 100000}],
        }
    ]
)


@pytest.fixture
def ruled_bot(tmp_path: Path, sqlite_url: str) -> Iterator[tuple[SlackWorld, BotInstance]]:
    """A world whose one Signoff instance has the small-refunds rule."""
    with SlackWorld(tmp_path, sqlite_url) as world:
        bot = BotInstance(world, dataclasses.replace(world.settings(), rules=RULES), migrate=True)
        world.instances.append(bot)
        yield world, bot


def test_an_auto_approved_call_shows_its_rule_on_the_card(
    ruled_bot: tuple[SlackWorld, BotInstance],
) -> None:
    """The refund is approved by rule:small-refunds at once; its card says so, no buttons;
    the email still waits for a person."""
    world, bot = ruled_bot
    run_id = start_refund_run(world, bot)
    approvals = approvals_of(bot, run_id)
    refund, email = approvals["issue_refund"], approvals["send_email"]
    assert refund.status == ApprovalStatus.APPROVED
    assert email.status == ApprovalStatus.PENDING
    card = world.card(refund.id)
    assert buttons(card) == []
    assert "✅ Approved, decided by rule:small-refunds at " in block_texts(card)
    assert buttons(world.card(email.id)) != []
