"""The Slack outbox under trouble: rate limits, crashed processes, several dispatchers.

Notices are committed with the changes that cause them; dispatchers deliver them to the fake
Slack with the real ``WebClient``. Every test counts ``chat.postMessage`` calls per message:
whatever happens, each notice is posted once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from agent_runtime import RunId, RunStatus
from agent_runtime.clock import Clock, SystemClock
from bot.slack.blocks import APPROVE
from bot.slack.dispatcher import Dispatcher, DispatchOptions
from tests.integration.slack_harness import (
    APPROVER,
    TASK,
    UNPACED_PACE,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import (
    buttons,
    outbox_rows,
    posts_per_message,
    run_id_of,
)
from tests.integration.slack_steps import (
    ShiftedClock,
    empty_postgres,
)

CLAIM_FOR = DispatchOptions().claim_for

POSTED_KINDS = ("run.root", "run.reply", "approval.card", "approval.dm")
"""The notices that become new messages (the others update cards or are ephemeral; a turn's
``approval.batch`` becomes one only if the turn asks two or more approvals, which the demo's
one order never does)."""


def dispatcher_at(
    bot: BotInstance, clock: Clock, owner: str, give_way: Callable[[], object] | None = None
) -> Dispatcher:
    """A dispatcher of ``bot``'s process that reads the time from ``clock`` (and calls
    ``give_way`` before each notice)."""
    return Dispatcher(
        bot.services.outbox,
        bot.client,
        bot.services.approvals,
        clock,
        owner,
        DispatchOptions(pace=UNPACED_PACE, give_way=give_way),
        runs=bot.services.store,
    )


def start_runs(bot: BotInstance, count: int) -> list[RunId]:
    """Type the refund task ``count`` times and run the worker to the approvals."""
    run_ids = [run_id_of(bot.command(TASK)) for _ in range(count)]
    bot.work()
    for run_id in run_ids:
        assert bot.services.runtime.get(run_id).status == RunStatus.WAITING
    return run_ids


def assert_each_notice_posted_once(world: SlackWorld, bot: BotInstance) -> None:
    """Every notice that becomes a message was delivered, by exactly one chat.postMessage."""
    rows = [r for r in outbox_rows(bot) if r["kind"] in POSTED_KINDS]
    assert rows, "there were notices to post"
    assert {r["status"] for r in rows} == {"sent"}, [(r["key"], r["status"]) for r in rows]
    counts = posts_per_message(world)
    assert set(counts.values()) == {1}, {k: n for k, n in counts.items() if n != 1}
    assert len(counts) == len(rows)
    assert len({(r["channel"], r["ts"]) for r in rows}) == len(rows)


def test_a_rate_limited_post_waits_for_retry_after_and_is_posted_once(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A 429 with Retry-After: 30 holds the run's notices 30 s; then each is posted once."""
    [run_id] = start_runs(bot, 1)
    world.workspace.rate_limit("chat.postMessage", times=1, retry_after=30)
    clock = ShiftedClock()
    dispatcher = dispatcher_at(bot, clock, "dispatcher-1")

    started = SystemClock().now()
    dispatcher.drain()
    attempts = [
        c
        for c in world.workspace.calls("chat.postMessage")
        if c.params.get("channel") == world.channel
    ]
    assert [c.status for c in attempts] == [429], "the run's later notices wait for the root"
    assert world.roots() == []
    [root] = [r for r in outbox_rows(bot) if r["kind"] == "run.root"]
    assert (root["status"], root["attempts"], root["last_error"]) == (
        "pending",
        1,
        "slack: ratelimited",
    )
    wait = root["next_at"] - started
    assert timedelta(seconds=29) < wait < timedelta(seconds=31), wait

    clock.offset = timedelta(seconds=28)
    dispatcher.drain()
    in_channel = [
        c
        for c in world.workspace.calls("chat.postMessage")
        if c.params.get("channel") == world.channel
    ]
    assert len(in_channel) == 1, "not before Retry-After"

    clock.offset = timedelta(seconds=31)
    dispatcher.drain()
    assert world.root_of(run_id).ts == outbox_rows(bot)[0]["ts"]
    assert len(world.replies(run_id)) == 4, "plans, lookup, plans, the refund's card"
    assert_each_notice_posted_once(world, bot)
    assert [c.status for c in world.workspace.calls("chat.postMessage")].count(429) == 1
    dispatcher.drain()
    bot.drain()
    assert_each_notice_posted_once(world, bot)


def test_notices_committed_before_a_crash_are_posted_by_the_next_process(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Notices left by a crashed process (unsent, or claimed) are posted by the next, once."""
    first, second = start_runs(bot, 2)
    crashed_before_dispatch = bot  # committed its notices, never dispatched, and is gone
    now = SystemClock().now()
    claimed = crashed_before_dispatch.services.outbox.claim_due(
        "crashed-dispatcher", now=now, until=now + CLAIM_FOR, limit=1
    )
    assert [q.notice.key for q in claimed] == [f"run:{first}:root"], "died holding a notice"
    assert world.workspace.calls("chat.postMessage") == []

    restarted = world.instance(migrate=False)
    restarted.drain()
    assert world.root_of(second).ts, "the unclaimed run is posted at once"
    assert [m.text for m in world.roots()] == [world.root_of(second).text]
    clock = ShiftedClock()
    late = dispatcher_at(restarted, clock, "dispatcher-2")
    clock.offset = CLAIM_FOR - timedelta(seconds=5)
    late.drain()
    assert len(world.roots()) == 1, "the dead dispatcher's claim still holds"

    clock.offset = CLAIM_FOR + timedelta(seconds=1)
    late.drain()
    assert len(world.replies(first)) == 4
    assert_each_notice_posted_once(world, restarted)
    world.instance(migrate=False).drain()
    assert_each_notice_posted_once(world, restarted)


class _Died(BaseException):
    """A dispatcher's process ending where it stood."""


def _die() -> None:
    raise _Died()


def test_a_batch_whose_dispatcher_died_before_sending_it_is_taken_over_after_the_pick_up(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A dispatcher that dies right after claiming a round's batch holds the notices it had
    not begun for the pick-up time (a quarter of a send's claim), not a whole claim; then
    another dispatcher posts each of them once."""
    first, second = start_runs(bot, 2)
    dying = dispatcher_at(bot, SystemClock(), "dying-dispatcher", give_way=_die)  # dies first
    with pytest.raises(_Died):
        dying.dispatch_once()
    claimed = [r for r in outbox_rows(bot) if r["claimed_by"] == "dying-dispatcher"]
    assert claimed, "it died holding notices"
    pick_up = DispatchOptions().pick_up
    assert pick_up < CLAIM_FOR
    clock = ShiftedClock()
    late = dispatcher_at(bot, clock, "dispatcher-2")
    clock.offset = pick_up - timedelta(seconds=5)
    late.drain()
    assert world.workspace.calls("chat.postMessage") == [], "the dead dispatcher's claim holds"

    clock.offset = pick_up + timedelta(seconds=1)
    late.drain()
    assert world.root_of(first).ts
    assert world.root_of(second).ts
    assert_each_notice_posted_once(world, bot)


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_concurrent_dispatchers_post_each_notice_once(
    tmp_path: Path, database: str, request: pytest.FixtureRequest
) -> None:
    """Three dispatchers draining one outbox at once post each notice once, threads in order."""
    url = str(request.getfixturevalue("sqlite_url" if database == "sqlite" else "pg_url"))
    if database == "postgres":
        empty_postgres(url)
    with SlackWorld(tmp_path, url) as world:
        bots = [world.instance(migrate=index == 0) for index in range(3)]
        run_ids = start_runs(bots[0], 4)
        barrier = threading.Barrier(len(bots))
        failures: list[BaseException] = []

        def drain(bot: BotInstance) -> None:
            try:
                barrier.wait()
                for _ in range(3):
                    bot.dispatcher.dispatch_once(limit=2)
                bot.drain()
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=drain, args=(bot,)) for bot in bots]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        bots[0].drain()
        assert_each_notice_posted_once(world, bots[0])
        for run_id in run_ids:
            replies = [m.text for m in world.replies(run_id)]
            assert replies[0].startswith("🤖 Plans: `lookup_order`")
            assert replies[1].startswith("🔧 `lookup_order` → ")
            assert replies[2].startswith("🤖 Plans: `issue_refund`")
            assert [r.split(" (")[0] for r in replies[3:]] == ["Approval needed: issue_refund"]


def test_an_approver_who_cannot_be_messaged_does_not_hold_up_the_thread(
    tmp_path: Path, sqlite_url: str
) -> None:
    """An approver Slack cannot DM does not hold the decision back from the card and thread."""
    with SlackWorld(tmp_path, sqlite_url, approvers=("U_GONE", APPROVER)) as world:
        bot = world.instance()
        [run_id] = start_runs(bot, 1)
        bot.drain()
        refund = bot.services.approvals.store.list_approvals(run_id=run_id)[-1]
        bot.click(APPROVER, APPROVE, world.card(refund.id))
        bot.decision(refund.id)
        bot.drain()
        assert buttons(world.card(refund.id)) == []
        assert any("Approved by <@U_DANA>" in r for r in world.reply_texts(run_id))


def test_a_passing_auth_error_is_retried_and_the_thread_still_appears(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A token error that is fixed later delays the thread; it does not lose it."""
    [run_id] = start_runs(bot, 1)
    world.workspace.fail("chat.postMessage", "invalid_auth")
    clock = ShiftedClock()
    dispatcher = dispatcher_at(bot, clock, "dispatcher-1")
    dispatcher.drain()
    assert world.roots() == []
    clock.offset = timedelta(minutes=1)
    dispatcher.drain()
    assert len(world.replies(run_id)) == 4, "plans, lookup, plans, the refund's card"
    assert_each_notice_posted_once(world, bot)
