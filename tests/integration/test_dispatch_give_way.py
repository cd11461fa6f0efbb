"""The dispatcher's manners: it gives way before each notice when asked to, and reads where a
run's root landed once rather than for every message threaded under it."""

from __future__ import annotations

import threading
from typing import Any

from agent_runtime.clock import SystemClock
from agent_runtime.notices import Delivery
from bot.slack.dispatcher import Dispatcher, DispatchOptions
from store import SqlOutbox
from tests.integration.slack_harness import TASK, UNPACED_PACE, BotInstance, SlackWorld
from tests.integration.slack_readers import outbox_rows, posts_per_message, run_id_of

WAIT_S = 30.0


class CountedLookups(SqlOutbox):
    """The outbox, counting the lookups of where each notice landed."""

    def __init__(self, outbox: SqlOutbox) -> None:
        super().__init__(outbox.engine)
        self.lookups: dict[str, int] = {}

    def delivery_of(self, key: str) -> Delivery | None:
        """Look up, counting."""
        self.lookups[key] = self.lookups.get(key, 0) + 1
        return super().delivery_of(key)


def dispatcher_of(bot: BotInstance, outbox: SqlOutbox, **options: Any) -> Dispatcher:
    """A dispatcher of ``bot``'s process with ``options``, unpaced."""
    return Dispatcher(
        outbox,
        bot.client,
        bot.services.approvals,
        SystemClock(),
        "giving-way",
        DispatchOptions(pace=UNPACED_PACE, **options),
        runs=bot.services.store,
    )


def assert_all_sent_once(world: SlackWorld, bot: BotInstance) -> None:
    """Every notice is sent, and no message was posted twice."""
    assert {r["status"] for r in outbox_rows(bot)} == {"sent"}
    assert set(posts_per_message(world).values()) == {1}


def test_a_dispatcher_that_gives_way_sends_nothing_until_let_go(
    world: SlackWorld, bot: BotInstance
) -> None:
    """``give_way`` runs before each notice: until it returns nothing reaches Slack; then
    every notice is sent, once."""
    run_id_of(bot.command(TASK))
    bot.work()
    asked, go = threading.Event(), threading.Event()

    def give_way() -> None:
        asked.set()
        assert go.wait(WAIT_S)

    sender = dispatcher_of(bot, bot.services.outbox, give_way=give_way)
    thread = threading.Thread(target=sender.drain)
    thread.start()
    assert asked.wait(WAIT_S)
    assert world.workspace.calls("chat.postMessage") == []
    go.set()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert_all_sent_once(world, bot)


def test_where_a_root_landed_is_read_once_per_dispatcher(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A run's replies and cards go under its root: the dispatcher that posted the root
    never reads where it landed, another one reads it once."""
    run_ids = [run_id_of(bot.command(TASK)) for _ in range(2)]
    bot.work()
    poster, other = CountedLookups(bot.services.outbox), CountedLookups(bot.services.outbox)
    posting = dispatcher_of(bot, poster, batch=1)
    assert posting.dispatch_once() == 1  # the first run's root
    assert dispatcher_of(bot, other, batch=1).dispatch_once() == 1  # the second run's root
    posting.drain()
    first_root, second_root = (f"run:{r}:root" for r in run_ids)
    threaded = [r for r in outbox_rows(bot) if r["kind"] in ("run.reply", "approval.card")]
    assert len(threaded) >= 4
    assert poster.lookups.get(first_root, 0) == 0
    assert poster.lookups[second_root] == 1
    assert_all_sent_once(world, bot)
