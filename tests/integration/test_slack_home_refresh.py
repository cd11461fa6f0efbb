"""The Home tab stays current: changes re-publish the tabs of the people they concern, on
SQLite and PostgreSQL, only for people who opened theirs, a few times for a burst.

Decisions arrive as signed clicks in the real Bolt app (on another instance, too) or through
the services the CLI uses; the dispatcher publishes to the fake Slack.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import Actor, ApprovalStatus, SystemClock
from bot.slack.blocks import APPROVE, GRANT_DAY
from bot.slack.grant_blocks import DAY_SUBMIT
from bot.slack.home import APPROVALS_SHOWN
from store.home_tabs import REFRESH_SPACING
from tests.integration.home_steps import (
    cards_on,
    click_home,
    latest,
    open_home,
    published,
    publishes,
    texts,
)
from tests.integration.slack_harness import (
    APPROVER,
    REQUESTER,
    SECOND_APPROVER,
    TASK,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import approvals_of, run_id_of
from tests.integration.slack_steps import (
    acked,
    empty_postgres,
    start_refund_run,
)

NARROWER = {"all": [{"field": "args.amount_cents", "op": "<=", "value": 100}]}
BURST = 20


@pytest.fixture(params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SlackWorld]:
    """Two approvers (either may decide), on a fresh SQLite file, then on PostgreSQL; the
    first instance may make 24-hour grants."""
    if request.param == "sqlite":
        url = str(request.getfixturevalue("sqlite_url"))
    else:
        url = str(request.getfixturevalue("pg_url"))
        empty_postgres(url)
    with SlackWorld(tmp_path, url, approvers=(APPROVER, SECOND_APPROVER)) as built:
        settings = dataclasses.replace(built.settings(), grant_approvers=(APPROVER,))
        built.instances.append(BotInstance(built, settings, migrate=True))
        yield built


@pytest.fixture
def bot(world: SlackWorld) -> BotInstance:
    """The world's first instance."""
    return world.instances[0]


def test_a_decision_on_the_thread_card_republishes_the_approvers_tab(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Approve clicked on the thread's card, on another instance, re-publishes the tab the
    approver opened before, without the card, with no second opening."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    open_home(bot, APPROVER)
    assert cards_on(published(world, APPROVER, 0, bot)) == [refund.id]

    other = world.instance()
    acked(other.click(APPROVER, APPROVE, world.card(refund.id)))
    assert bot.decision(refund.id).status == ApprovalStatus.APPROVED
    assert cards_on(published(world, APPROVER, 1, bot)) == []


def test_only_people_who_opened_their_tab_have_it_published(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A decision re-publishes the tab of the approver who opened it; the approver who decided
    and the requester, who never opened theirs, are sent no ``views.publish`` at all."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    open_home(bot, SECOND_APPROVER)
    assert cards_on(published(world, SECOND_APPROVER, 0, bot)) == [refund.id]

    acked(bot.click(APPROVER, APPROVE, world.card(refund.id)))
    assert bot.decision(refund.id).status == ApprovalStatus.APPROVED
    assert cards_on(published(world, SECOND_APPROVER, 1, bot)) == []
    bot.drain()
    assert publishes(world, APPROVER) == 0
    assert publishes(world, REQUESTER) == 0


def test_a_run_beginning_and_ending_republishes_its_requesters_tab(
    world: SlackWorld, bot: BotInstance
) -> None:
    """The requester who opened their tab sees their run there as soon as it is started from
    Slack, and cancelled once it is, with no approval of theirs changing between."""
    open_home(bot, REQUESTER)
    assert "You have started no runs yet" in texts(published(world, REQUESTER, 0, bot))

    run_id = run_id_of(acked(bot.command(TASK)))
    pending = f"`{run_id}` pending"
    assert pending in texts(published(world, REQUESTER, 1, bot, saying=pending))

    bot.services.runtime.cancel(run_id, by=Actor(user_id="operator"))
    cancelled = f"`{run_id}` cancelled"
    assert cancelled in texts(published(world, REQUESTER, 2, bot, saying=cancelled))
    bot.drain()
    assert publishes(world, REQUESTER) == 3


def _ask_many(bot: BotInstance, run_id: str, count: int) -> None:
    """Ask ``count`` more refunds in the run, one transaction each, as fast as they go."""
    refund = approvals_of(bot, run_id)["issue_refund"]
    tool = next(t for t in bot.services.agents.get().tools if t.name == refund.tool)
    for n in range(count):
        bot.services.approvals.request(
            run_id=run_id,
            position=1000 + n,
            tool=tool,
            args={**refund.args, "order_id": f"2{n:03d}"},
            policy=refund.policy,
            requester=refund.requester,
            now=SystemClock().now(),
        )


def test_twenty_approvals_asked_at_once_publish_the_tab_once(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Twenty approvals asked before the dispatcher's next round publish the approver's tab
    once, showing all of them: each change joined the refresh already waiting."""
    run_id = start_refund_run(world, bot)
    open_home(bot, APPROVER)
    published(world, APPROVER, 0, bot)

    _ask_many(bot, run_id, BURST)
    view = published(world, APPROVER, 1, bot)
    assert f"and {BURST + 1 - len(cards_on(view))} more" in texts(view)
    bot.drain()
    assert publishes(world, APPROVER) == 2


def test_a_burst_while_the_dispatcher_runs_publishes_a_few_times(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Twenty approvals asked while a dispatcher keeps sending publish the approver's tab at
    most once per spacing interval (plus the first and the last), not once per approval."""
    run_id = start_refund_run(world, bot)
    open_home(bot, APPROVER)
    published(world, APPROVER, 0, bot)
    done = threading.Event()

    def dispatch() -> None:
        while not done.is_set():
            bot.drain()
            time.sleep(0.01)

    sender = threading.Thread(target=dispatch, name="test-dispatch", daemon=True)
    sender.start()
    started = time.monotonic()
    try:
        _ask_many(bot, run_id, BURST)
        elapsed = time.monotonic() - started

        def all_shown() -> bool:
            return f"and {BURST + 1 - APPROVALS_SHOWN} more" in texts(latest(world, APPROVER))

        eventually(all_shown, what="the tab showing every approval", timeout=15.0)
    finally:
        done.set()
        sender.join(timeout=10)
    bound = 2 + math.ceil(elapsed / REFRESH_SPACING.total_seconds())
    assert 2 <= publishes(world, APPROVER) <= 1 + bound < BURST


def test_a_day_grant_submitted_from_the_tab_refreshes_it_and_a_revocation_too(
    world: SlackWorld, bot: BotInstance
) -> None:
    """The 24-hour modal opened on the tab approves and grants when submitted, and the tab is
    published again showing the grant; revoked as the CLI does, it is published without it."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    open_home(bot, APPROVER)
    view = published(world, APPROVER, 0, bot)

    click_home(bot, APPROVER, view, GRANT_DAY, refund.id)
    modal = world.modal(DAY_SUBMIT, refund.id)
    assert acked(bot.submit(APPROVER, modal, json.dumps(NARROWER))).body == ""
    (grant,) = bot.services.grants.list()
    granted = published(world, APPROVER, 1, bot)
    assert cards_on(granted) == []
    assert f"grant `{grant.id}`" in texts(granted)

    bot.services.grants.revoke(grant.id, Actor(user_id="operator"), operator=True)

    def revoked() -> bool:
        return f"grant `{grant.id}`" not in texts(latest(world, APPROVER))

    eventually(revoked, between=bot.drain, what="the tab without the revoked grant")
