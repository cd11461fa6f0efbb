"""Posts are paced per channel, as Slack asks, without one busy channel holding up another."""

from __future__ import annotations

import time
from datetime import timedelta

from agent_runtime.clock import SystemClock
from bot.slack.dispatcher import Dispatcher, DispatchOptions
from bot.slack.pacing import Pace
from tests.integration.slack_harness import (
    TASK,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import outbox_rows, run_id_of
from tests.integration.slack_steps import (
    acked,
)

PACE = Pace(every=timedelta(milliseconds=100), burst=3)
JITTER_S = 0.1
"""How much the fake Slack's log of a post may lag its slot (HTTP and a loaded machine)."""
BUSY_RUNS = 5


def post_times(world: SlackWorld, channel: str) -> list[float]:
    """When each message was posted to ``channel``, in order."""
    return [
        c.at for c in world.successful("chat.postMessage") if c.params.get("channel") == channel
    ]


def deliver_everything(bot: BotInstance, dispatcher: Dispatcher, deadline_s: float) -> None:
    """Run the dispatcher until no notice is pending (polling, within ``deadline_s``)."""
    deadline = time.monotonic() + deadline_s
    while any(r["status"] == "pending" for r in outbox_rows(bot)):
        assert time.monotonic() < deadline, "notices still pending"
        if not dispatcher.dispatch_once():
            time.sleep(0.01)


def test_five_runs_in_one_channel_are_paced_and_another_channel_is_not_held_up(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A token bucket per channel: burst, then one post per interval, in order per run."""
    quiet = world.workspace.add_channel("quiet", with_bot=True).id
    busy_runs = [run_id_of(acked(bot.command(TASK))) for _ in range(BUSY_RUNS)]
    quiet_run = run_id_of(acked(bot.command(TASK, channel=quiet)))
    bot.work()
    dispatcher = Dispatcher(
        bot.services.outbox,
        bot.client,
        bot.services.approvals,
        SystemClock(),
        "pacer",
        DispatchOptions(pace=PACE),
    )
    deliver_everything(bot, dispatcher, deadline_s=30)

    busy = post_times(world, world.channel)
    every = PACE.every.total_seconds()
    assert len(busy) >= BUSY_RUNS * 5
    for index, at in enumerate(busy):
        assert at - busy[0] >= (index - PACE.burst + 1) * every - JITTER_S, index
    quiet_done = post_times(world, quiet)[-1]
    assert quiet_done < busy[len(busy) // 2], "the quiet channel waited for the busy one"
    rows = outbox_rows(bot)
    for run_id in [*busy_runs, quiet_run]:
        posted = sorted(
            (r for r in rows if r["run_id"] == run_id and r["ts"]), key=lambda r: float(r["ts"])
        )
        assert [r["id"] for r in posted] == sorted(r["id"] for r in posted), "run order kept"
