"""The run's root message tells the story: its live status, updated in place, and the answer."""

from __future__ import annotations

from agent_runtime import RunStatus
from bot.slack.blocks import APPROVE
from tests.integration.slack_harness import (
    APPROVER,
    BotInstance,
    SlackWorld,
    acked,
    start_refund_run,
)
from tests.integration.slack_readers import approvals_of, block_texts


def test_the_root_shows_who_the_run_waits_for_and_then_its_answer(
    world: SlackWorld, bot: BotInstance
) -> None:
    """The root is edited in place from "waiting for X's sign-off" to the run's final answer."""
    run_id = start_refund_run(world, bot)
    root = world.root_of(run_id)
    who = f"<@{APPROVER}>'s sign-off on"
    assert f"⏳ *Waiting* for {who} *issue_refund*; {who} *send_email*" in block_texts(root)
    approvals = approvals_of(bot, run_id)

    acked(bot.click(APPROVER, APPROVE, world.card(approvals["issue_refund"].id)))
    bot.drain()
    assert f"⏳ *Waiting* for {who} *send_email*" in block_texts(world.root_of(run_id))
    acked(bot.click(APPROVER, APPROVE, world.card(approvals["send_email"].id)))
    bot.drain()
    assert "🔄 *Running*" in block_texts(world.root_of(run_id))
    bot.work()
    bot.drain()

    run = bot.services.runtime.get(run_id)
    assert run.status == RunStatus.COMPLETED
    final = world.root_of(run_id)
    assert final.ts == root.ts
    assert "✅ *Completed:* " in block_texts(final)
    assert str(run.output["answer"])[:40] in block_texts(final)
    assert "✅ *Completed:* " in final.text, "the fallback text (notifications) says it too"


def test_the_root_says_a_cancelled_run_was_cancelled(world: SlackWorld, bot: BotInstance) -> None:
    """A run cancelled while it waits shows so on its root, not only in the thread."""
    run_id = start_refund_run(world, bot)
    bot.services.runtime.cancel(run_id)
    bot.drain()
    assert "🛑 *Cancelled*" in block_texts(world.root_of(run_id))
    assert bot.services.runtime.get(run_id).status == RunStatus.CANCELLED
