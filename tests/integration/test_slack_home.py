"""The App Home tab: what waits on the person looking, decided there exactly as on the card.

Signed ``app_home_opened`` events and clicks go into the real Bolt app; the dispatcher
publishes the tab to the fake Slack with ``views.publish``; what it published is checked
with slack_sdk's View and Block models.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import ApprovalStatus
from bot.slack.blocks import APPROVE, EDIT, REJECT
from tests.integration.home_steps import (
    JSON,
    cards_on,
    click_home,
    open_home,
    published,
    publishes,
    texts,
)
from tests.integration.slack_harness import (
    APPROVER,
    BATCH_TASK,
    OUTSIDER,
    REQUESTER,
    SECOND_APPROVER,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import approvals_of, asked_in_order, canonical_args
from tests.integration.slack_steps import (
    acked,
    empty_postgres,
    has_status,
    start_refund_run,
)

OTHER_TEAM = "T0ELSEWHERE"


@pytest.fixture
def quorum_world(tmp_path: Path, pg_url: str) -> Iterator[SlackWorld]:
    """One instance on PostgreSQL; every action needs both approvers."""
    empty_postgres(pg_url)
    with SlackWorld(tmp_path, pg_url, approvers=(APPROVER, SECOND_APPROVER), required=2) as built:
        built.instance()
        yield built


def test_home_lists_what_waits_on_the_person_oldest_first(
    world: SlackWorld, bot: BotInstance
) -> None:
    """The approver's tab shows both refunds, oldest first, with deadlines and the arguments'
    hash on Approve; the requester sees their run and no card; an outsider sees nothing."""
    run_id = start_refund_run(world, bot, BATCH_TASK)
    first, second = asked_in_order(bot, run_id)

    open_home(bot, APPROVER)
    view = published(world, APPROVER, 0, bot)
    assert view["type"] == "home"
    assert cards_on(view) == [first.id, second.id]
    assert "*Deadline* <!date^" in texts(view)
    assert f'"value": "{first.id}:{first.proposed_hash}"' in texts(view)

    open_home(bot, REQUESTER)
    mine = published(world, REQUESTER, 0, bot)
    assert cards_on(mine) == []
    assert f"`{run_id}` waiting" in texts(mine)

    open_home(bot, OUTSIDER)
    outside = published(world, OUTSIDER, 0, bot)
    assert cards_on(outside) == []
    assert "Nothing is waiting on you." in texts(outside)
    assert run_id not in texts(outside)


def test_the_same_user_id_of_another_workspace_sees_none_of_them(
    pg_world: SlackWorld,
) -> None:
    """An approver's user id opening the tab from another workspace is shown no approval."""
    bot = pg_world.instance()
    start_refund_run(pg_world, bot)
    open_home(bot, APPROVER, team=OTHER_TEAM)
    view = published(pg_world, APPROVER, 0, bot)
    assert cards_on(view) == []
    open_home(bot, APPROVER)
    assert len(cards_on(published(pg_world, APPROVER, 1, bot))) == 1


def test_approve_on_home_decides_like_the_card_and_refreshes_the_tab(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Approve on the tab records the decision, updates the card in the thread, and the tab
    is published again without that approval."""
    run_id = start_refund_run(world, bot, BATCH_TASK)
    first, second = asked_in_order(bot, run_id)
    open_home(bot, APPROVER)
    view = published(world, APPROVER, 0, bot)

    click_home(bot, APPROVER, view, APPROVE, first.id)
    decided = bot.decision(first.id)
    assert decided.status == ApprovalStatus.APPROVED
    assert decided.decided_by is not None
    assert decided.decided_by.user_id == APPROVER
    refreshed = published(world, APPROVER, 1, bot)
    assert cards_on(refreshed) == [second.id]
    bot.drain()
    assert f"Approved by <@{APPROVER}>" in json.dumps(world.card(first.id).blocks)
    assert has_status(bot, second.id, ApprovalStatus.PENDING)


def test_reject_from_home_opens_the_cards_modal_and_refreshes_after_the_submit(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Reject on the tab opens the card's reason modal; its submission rejects the call and
    publishes the tab again."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    open_home(bot, APPROVER)
    view = published(world, APPROVER, 0, bot)

    click_home(bot, APPROVER, view, REJECT, refund.id)
    modal = world.modal("approval.reject_submit", refund.id)
    assert acked(bot.submit(APPROVER, modal, "not this customer")).body == ""
    assert bot.decision(refund.id).status == ApprovalStatus.REJECTED
    assert cards_on(published(world, APPROVER, 1, bot)) == []


def test_a_stale_approve_on_home_is_refused_and_the_tab_shows_why(
    quorum_world: SlackWorld,
) -> None:
    """A tab published before another approver edited the arguments approves nothing: the
    tab is published again saying so, with the card's new arguments."""
    world = quorum_world
    [bot] = world.instances
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    open_home(bot, APPROVER)
    old = published(world, APPROVER, 0, bot)

    acked(bot.click(SECOND_APPROVER, EDIT, world.card(refund.id)))
    edit = world.modal("approval.edit_submit", refund.id)
    edited_args = {"order_id": "1045", "amount_cents": 89900}
    assert acked(bot.submit(SECOND_APPROVER, edit, canonical_args(edited_args))).body == ""
    edited = bot.services.approvals.get(refund.id)
    assert edited.proposed_hash != refund.proposed_hash

    click_home(bot, APPROVER, old, APPROVE, refund.id)
    refusal = "Not recorded: the arguments changed since you were shown them"
    told = published(world, APPROVER, 1, bot, saying=refusal)  # the edit's refresh may be first
    assert refusal in texts(told)
    assert f'"value": "{refund.id}:{edited.proposed_hash}"' in texts(told)
    current = bot.services.approvals.get(refund.id)
    assert current.status == ApprovalStatus.PENDING
    assert [v["user_id"] for v in current.approvals] == [SECOND_APPROVER]


def test_the_messages_tab_publishes_nothing(world: SlackWorld, bot: BotInstance) -> None:
    """``app_home_opened`` for the Messages tab leaves the Home tab alone."""
    ws = world.workspace
    body = {
        "token": "legacy-verification-token",
        "team_id": ws.team_id,
        "api_app_id": ws.app_id,
        "type": "event_callback",
        "event_id": "Ev0MESSAGES",
        "event_time": int(time.time()),
        "event": {"type": "app_home_opened", "user": APPROVER, "tab": "messages"},
    }
    acked(bot.post(json.dumps(body).encode(), content_type=JSON))
    open_home(bot, OUTSIDER)
    published(world, OUTSIDER, 0, bot)  # delivered after the first event, were there one
    assert publishes(world, APPROVER) == 0


def test_the_event_url_answers_slacks_challenge(world: SlackWorld, bot: BotInstance) -> None:
    """Setting the manifest's event request URL works: the signed challenge is echoed."""
    body = {
        "token": "legacy-verification-token",
        "challenge": "3eZbrw1aB",
        "type": "url_verification",
    }
    answer = acked(bot.post(json.dumps(body).encode(), content_type=JSON))
    assert "3eZbrw1aB" in answer.body
    forged = bot.post(json.dumps(body).encode(), content_type=JSON, secret="not-the-secret")
    assert forged.status == 401
