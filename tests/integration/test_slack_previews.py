"""Previews in Slack, end to end: the order changes between Approve and execution.

The demo agent's refund shows what it would do, read from the demo provider's order. The
scenario approves it from the card, changes the order at the provider (over its HTTP API),
runs the worker, and checks that nothing was charged, that the old card says it was
superseded, and that a new card asks again with the new preview.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from agent_runtime import ApprovalStatus, RunStatus
from agent_runtime.side_effects import PREVIEW_CHANGED
from bot.slack.blocks import APPROVE, VIEW_ARGS
from tests.integration.slack_harness import (
    APPROVER,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import asked_in_order, block_texts, buttons
from tests.integration.slack_steps import (
    acked,
    empty_postgres,
    start_refund_run,
)

BEFORE = "Refund 49.99 USD to Dana Example for order 1042"
AFTER = "Refund 49.99 EUR to Dana Example for order 1042"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def two(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[SlackWorld, BotInstance, BotInstance]]:
    """A world with two Signoff instances on one database: a SQLite file, or PostgreSQL."""
    if request.param == "sqlite":
        url = request.getfixturevalue("sqlite_url")
    else:
        url = request.getfixturevalue("pg_url")
        empty_postgres(url)
    with SlackWorld(tmp_path, url) as built:
        yield built, built.instance(), built.instance()


def change_order(world: SlackWorld, **changes: object) -> None:
    """Change order 1042 at the demo provider, as its shop would."""
    answer = requests.patch(f"{world.provider.url}/v1/orders/1042", json=changes, timeout=10)
    assert answer.status_code == 200, answer.text


def test_an_order_changed_after_approve_is_not_refunded_and_is_asked_again(
    two: tuple[SlackWorld, BotInstance, BotInstance],
) -> None:
    """Approved on a USD preview on one instance, the refund meets an order now in EUR on
    the other: no charge, the card says superseded, a new card shows the EUR preview, and
    approving that one refunds in EUR."""
    world, bot, other = two
    run_id = start_refund_run(world, bot)
    [refund] = asked_in_order(bot, run_id)
    card = world.card(refund.id)
    assert f"*What it will do*\n{BEFORE}" in block_texts(card)
    assert (VIEW_ARGS, refund.id) in buttons(card)

    acked(bot.click(APPROVER, APPROVE, card))
    assert bot.decision(refund.id).status == ApprovalStatus.APPROVED
    change_order(world, currency="EUR")
    other.work()
    other.drain()

    assert world.provider.ledger.charges() == [], "nothing runs on a preview nobody approved"
    assert bot.services.runtime.get(run_id).status == RunStatus.WAITING
    old, again = asked_in_order(bot, run_id)
    assert (old.id, old.status, old.reason) == (
        refund.id,
        ApprovalStatus.SUPERSEDED,
        PREVIEW_CHANGED,
    )
    assert again.status == ApprovalStatus.PENDING
    assert again.tool == "issue_refund"
    assert again.args == refund.args
    closed = world.card(refund.id)
    assert buttons(closed) == []
    assert "🔁 Superseded" in block_texts(closed)
    assert f"🚫 `issue_refund` was not run: {PREVIEW_CHANGED}" in world.reply_texts(run_id)
    new_card = world.card(again.id)
    assert f"*What it will do*\n{AFTER}" in block_texts(new_card)
    entries, _ = bot.services.approvals.store.audit_log()
    superseded = [e for e in entries if e.action == "superseded"]
    assert [e.approval_id for e in superseded] == [refund.id]
    assert superseded[0].detail is not None
    assert AFTER in superseded[0].detail["new_preview"]["text"]

    acked(bot.click(APPROVER, APPROVE, new_card))
    assert bot.decision(again.id).status == ApprovalStatus.APPROVED
    bot.work()
    [charge] = world.provider.ledger.charges()
    assert (charge.order_id, charge.amount_cents, charge.currency) == ("1042", 4999, "EUR")
