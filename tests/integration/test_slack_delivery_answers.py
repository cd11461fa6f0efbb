"""What the dispatcher does with odd answers and odd failures, one notice at a time."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from agent_runtime.notices import Notice
from bot.slack.dispatcher import Dispatcher, DispatchOptions
from bot.slack.notifier import EPHEMERAL, ROOT
from tests.integration.slack_harness import (
    APPROVER,
    REQUESTER,
    TASK,
    UNPACED_PACE,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import outbox_rows, run_id_of
from tests.integration.slack_steps import (
    ShiftedClock,
    acked,
)


def dispatcher_at(bot: BotInstance, clock: ShiftedClock) -> Dispatcher:
    """A dispatcher of ``bot``'s process that reads the time from ``clock``."""
    return Dispatcher(
        bot.services.outbox,
        bot.client,
        bot.services.approvals,
        clock,
        "dispatcher-1",
        DispatchOptions(pace=UNPACED_PACE),
    )


def test_an_ok_answer_without_channel_and_ts_is_not_a_delivery(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A bare ``{"ok": true}`` leaves the notice pending, and it is posted later, once."""
    run_id = run_id_of(acked(bot.command(TASK)))
    world.workspace.answer_bare("chat.postMessage")
    clock = ShiftedClock()
    dispatcher = dispatcher_at(bot, clock)
    dispatcher.drain()
    [root] = [r for r in outbox_rows(bot) if r["kind"] == ROOT]
    assert (root["status"], root["channel"], root["ts"]) == ("pending", None, None)
    assert root["last_error"] == "slack: ok without channel and ts"
    clock.offset = timedelta(minutes=1)
    dispatcher.drain()
    [root] = [r for r in outbox_rows(bot) if r["kind"] == ROOT]
    assert (root["status"], root["channel"], root["ts"]) == (
        "sent",
        world.channel,
        world.root_of(run_id).ts,
    )


def test_one_notice_failing_unexpectedly_does_not_stop_the_others(
    world: SlackWorld, bot: BotInstance, caplog: pytest.LogCaptureFixture
) -> None:
    """A notice the dispatcher cannot handle is logged and retried; the rest are delivered."""
    now = bot.services.runtime.clock.now()
    bot.services.outbox.enqueue(
        [
            Notice(key="broken", run_id=None, kind="no.such.kind", data={}),
            Notice(
                key="fine",
                run_id=None,
                kind=EPHEMERAL,
                data={"channel": world.channel, "user": REQUESTER, "text": "still here"},
            ),
        ],
        now,
    )
    with caplog.at_level(logging.ERROR, logger="bot.slack.dispatcher"):
        assert dispatcher_at(bot, ShiftedClock()).dispatch_once() == 2
    assert [e.text for e in world.workspace.ephemerals(user=REQUESTER)] == ["still here"]
    broken = next(r for r in outbox_rows(bot) if r["key"] == "broken")
    assert (broken["status"], broken["claimed_until"]) == ("pending", None)
    assert broken["last_error"].startswith("unexpected: ValueError")
    [logged] = [r for r in caplog.records if r.exc_info and r.name == "bot.slack.dispatcher"]
    assert logged.getMessage() == "delivering a notice failed unexpectedly"


def test_an_approver_dm_channel_is_opened_once(world: SlackWorld, bot: BotInstance) -> None:
    """Cards for the same approver reuse the DM channel instead of opening it each time."""
    for _ in range(2):
        run_id_of(acked(bot.command(TASK)))
    bot.work()
    bot.drain()
    cards = world.dm(APPROVER)
    assert len(cards) >= 2
    assert len(world.successful("conversations.open")) == 1
