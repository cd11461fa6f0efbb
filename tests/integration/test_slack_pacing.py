"""Posts are paced per channel, as Slack asks, without one busy channel holding up another.

The dispatcher runs on a clock this test moves: each round of dispatching happens at a known
time, a fixed step after the last, however slowly the machine runs it. So pacing is measured
in the dispatcher's own time, and the quiet channel's posts are compared with the busy one's
in rounds that always keep up with the pace.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent_runtime.clock import FrozenClock
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
TICK = timedelta(milliseconds=10)
"""How far the dispatcher's clock moves between two rounds: a tenth of the pace."""
MAX_ROUNDS = 3000
"""Thirty seconds of the dispatcher's time: far more than the posts need."""
BUSY_RUNS = 5


def deliver_everything(
    world: SlackWorld, bot: BotInstance, dispatcher: Dispatcher, clock: FrozenClock
) -> dict[str, list[datetime]]:
    """Dispatch round after round, the clock one ``TICK`` further each time, until no notice
    is pending; return when (by the dispatcher's clock) each channel was posted to."""
    posted: dict[str, list[datetime]] = {}
    seen = 0
    for _ in range(MAX_ROUNDS):
        if not any(r["status"] == "pending" for r in outbox_rows(bot)):
            return posted
        dispatcher.dispatch_once()
        posts = world.successful("chat.postMessage")
        for call in posts[seen:]:
            posted.setdefault(str(call.params.get("channel")), []).append(clock.now())
        seen = len(posts)
        clock.advance(TICK)
    raise AssertionError(f"notices still pending after {MAX_ROUNDS} rounds")


def test_five_runs_in_one_channel_are_paced_and_another_channel_is_not_held_up(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A token bucket per channel: burst, then one post per interval, in order per run."""
    quiet = world.workspace.add_channel("quiet", with_bot=True).id
    busy_runs = [run_id_of(acked(bot.command(TASK))) for _ in range(BUSY_RUNS)]
    quiet_run = run_id_of(acked(bot.command(TASK, channel=quiet)))
    bot.work()
    clock = FrozenClock(datetime.now(UTC))  # every notice written so far is due
    dispatcher = Dispatcher(
        bot.services.outbox,
        bot.client,
        bot.services.approvals,
        clock,
        "pacer",
        DispatchOptions(pace=PACE),
    )
    posted = deliver_everything(world, bot, dispatcher, clock)

    busy, quiet_posts = posted[world.channel], posted[quiet]
    assert len(busy) >= BUSY_RUNS * 5
    for index, at in enumerate(busy):
        assert at - busy[0] >= (index - PACE.burst + 1) * PACE.every, index
    assert quiet_posts[-1] < busy[len(busy) // 2], "the quiet channel waited for the busy one"
    rows = outbox_rows(bot)
    for run_id in [*busy_runs, quiet_run]:
        posted_rows = sorted(
            (r for r in rows if r["run_id"] == run_id and r["ts"]), key=lambda r: float(r["ts"])
        )
        assert [r["id"] for r in posted_rows] == sorted(r["id"] for r in posted_rows), (
            "run order kept"
        )
