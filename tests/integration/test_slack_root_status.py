"""The run's root message tells the story: its live status, updated in place, and the answer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from agent_runtime import RunStatus
from bot.slack.blocks import APPROVE
from tests.integration.slack_harness import (
    APPROVER,
    BATCH_TASK,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import approvals_of, asked_in_order, block_texts
from tests.integration.slack_steps import (
    acked,
    start_refund_run,
)


def test_the_root_shows_who_the_run_waits_for_and_then_its_answer(
    world: SlackWorld, bot: BotInstance
) -> None:
    """The root is edited in place from "waiting for X's sign-off" to the run's final answer."""
    run_id = start_refund_run(world, bot, BATCH_TASK)
    root = world.root_of(run_id)
    who = f"<@{APPROVER}>'s sign-off on"
    assert f"⏳ *Waiting* for {who} *issue_refund*; {who} *issue_refund*" in block_texts(root)
    first, second = asked_in_order(bot, run_id)

    acked(bot.click(APPROVER, APPROVE, world.card(first.id)))
    bot.decision(first.id)  # recorded after the ack
    bot.drain()
    assert block_texts(world.root_of(run_id)).count("sign-off on") == 1
    acked(bot.click(APPROVER, APPROVE, world.card(second.id)))
    bot.decision(second.id)  # recorded after the ack
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


def test_an_approved_refund_runs_and_shows_while_the_email_still_waits(
    world: SlackWorld, bot: BotInstance
) -> None:
    """The refund approved first is charged and reported in the thread before the email's
    decision, and the root then waits only for the email."""
    run_id = start_refund_run(world, bot)
    approvals = approvals_of(bot, run_id)
    acked(bot.click(APPROVER, APPROVE, world.card(approvals["issue_refund"].id)))
    bot.decision(approvals["issue_refund"].id)  # recorded after the ack
    bot.work()
    bot.drain()
    assert [c.order_id for c in world.provider.ledger.charges()] == ["1042"]
    assert any(r.startswith("🔧 `issue_refund` → ") for r in world.reply_texts(run_id))
    assert world.provider.ledger.emails() == []
    assert block_texts(world.root_of(run_id)).count("sign-off on") == 1
    assert "*send_email*" in block_texts(world.root_of(run_id))


def test_a_later_call_approved_first_is_shown_waiting_for_the_earlier_one(
    world: SlackWorld, bot: BotInstance
) -> None:
    """The second refund approved before the first is decided: the root says it runs after."""
    run_id = start_refund_run(world, bot, BATCH_TASK)
    _, second = asked_in_order(bot, run_id)
    acked(bot.click(APPROVER, APPROVE, world.card(second.id)))
    bot.decision(second.id)  # recorded after the ack
    bot.work()
    bot.drain()
    assert world.provider.ledger.charges() == []
    status = block_texts(world.root_of(run_id))
    assert (
        f"⏳ *Waiting* for <@{APPROVER}>'s sign-off on *issue_refund* · *issue_refund* "
        "approved, runs once the calls before it are decided"
    ) in status


def test_the_thread_status_says_what_the_run_waits_for_and_clears_when_it_ends(
    tmp_path: Path, sqlite_url: str
) -> None:
    """With SIGNOFF_ASSISTANT_STATUS, the thread's status names the call awaiting sign-off,
    follows the run from the refund to the email, and is cleared once nothing waits."""
    with SlackWorld(tmp_path, sqlite_url) as world:
        bot = BotInstance(world, replace(world.settings(), assistant_status=True), migrate=True)
        world.instances.append(bot)
        run_id = start_refund_run(world, bot)
        root = world.root_of(run_id)

        def status() -> str:
            return world.workspace.thread_status(root.channel, root.ts)

        assert status() == "is waiting for a sign-off on issue_refund"
        for tool in ("issue_refund", "send_email"):
            approval = approvals_of(bot, run_id)[tool]
            acked(bot.click(APPROVER, APPROVE, world.card(approval.id)))
            bot.decision(approval.id)  # recorded after the ack
            bot.drain()
            assert status() == ""  # approved: the run no longer waits for anyone
            bot.work()
            bot.drain()
            if tool == "issue_refund":
                eventually(lambda: status().endswith("send_email"), what="the email's status")
        assert bot.services.runtime.get(run_id).status == RunStatus.COMPLETED
        assert status() == ""
        assert world.successful("assistant.threads.setStatus")


def test_without_the_setting_no_thread_status_is_set(world: SlackWorld, bot: BotInstance) -> None:
    """By default only the root message's status line says what the run waits for."""
    start_refund_run(world, bot)
    assert world.successful("chat.update")
    assert world.workspace.calls("assistant.threads.setStatus") == []
