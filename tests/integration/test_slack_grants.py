"""Grants from the card in Slack: approve and allow similar, the 24-hour modal showing its
predicate first, the grant's message and its Revoke button; no DMs for automatic decisions."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import ApprovalStatus
from agent_runtime.grants import GrantScope
from agent_runtime.rules import Rules
from bot.slack.blocks import GRANT_DAY, GRANT_RUN
from bot.slack.grant_blocks import DAY_SUBMIT, GRANT_REVOKE
from devkit.sandbox.slack_api import Message
from tests.integration.slack_harness import (
    APPROVER,
    OUTSIDER,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import approvals_of, block_texts, buttons
from tests.integration.slack_steps import (
    acked,
    start_refund_run,
)

NARROWER = {"all": [{"field": "args.amount_cents", "op": "<=", "value": 100}]}


@pytest.fixture
def world(tmp_path: Path, sqlite_url: str) -> Iterator[SlackWorld]:
    """A world with no instance yet."""
    with SlackWorld(tmp_path, sqlite_url) as made:
        yield made


def _bot(
    world: SlackWorld, *, grant_approvers: tuple[str, ...] = (), rules: Rules | None = None
) -> BotInstance:
    settings = dataclasses.replace(
        world.settings(), grant_approvers=grant_approvers, rules=rules or Rules()
    )
    bot = BotInstance(world, settings, migrate=True)
    world.instances.append(bot)
    return bot


def _grant_message(world: SlackWorld, run_id: str, bot: BotInstance) -> Message:
    def probe() -> Message | None:
        found = [m for m in world.replies(run_id) if "allowed similar calls" in m.text]
        return found[0] if found else None

    return eventually(probe, between=bot.drain, what="the grant's message")


def test_approve_and_allow_for_the_run_then_revoke_from_the_grant_message(
    world: SlackWorld,
) -> None:
    """The click approves the refund and posts the grant with Revoke; an outsider's Revoke
    changes nothing; the approver's revokes it and the message says so, without buttons."""
    bot = _bot(world)
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    acked(bot.click(APPROVER, GRANT_RUN, world.card(refund.id)))
    assert bot.decision(refund.id).status == ApprovalStatus.APPROVED
    (grant,) = eventually(bot.services.grants.list, what="the grant")
    assert (grant.scope, grant.granted_by.user_id, grant.run_id) == (
        GrantScope.RUN,
        APPROVER,
        run_id,
    )
    message = _grant_message(world, run_id, bot)
    assert buttons(message) == [(GRANT_REVOKE, grant.id)]
    seen = len(world.ephemerals(OUTSIDER))
    acked(bot.click(OUTSIDER, GRANT_REVOKE, message))
    assert world.new_ephemerals(OUTSIDER, seen, drain=bot) == [
        "Sorry: you may not revoke this grant."
    ]
    assert bot.services.grants.list(active=True) == [grant]
    acked(bot.click(APPROVER, GRANT_REVOKE, message))

    def revoked() -> Message | None:
        bot.drain()
        now = _grant_message(world, run_id, bot)
        return now if "Revoked" in block_texts(now) else None

    assert buttons(eventually(revoked, what="the revoked grant's message")) == []
    assert bot.services.grants.list(active=True) == []


def test_a_day_grant_shows_its_predicate_before_it_is_made(world: SlackWorld) -> None:
    """The modal shows the predicate and decides nothing; submitted narrowed, it approves the
    call and makes a 24-hour grant of exactly that predicate."""
    bot = _bot(world, grant_approvers=(APPROVER,))
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    acked(bot.click(APPROVER, GRANT_DAY, world.card(refund.id)))
    modal = world.modal(DAY_SUBMIT, refund.id)
    assert "args.amount_cents &lt;= " in json.dumps(modal.view) or "args.amount_cents <= " in (
        json.dumps(modal.view, ensure_ascii=False)
    )
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING
    assert bot.services.grants.list() == []
    acked(bot.submit(APPROVER, modal, json.dumps(NARROWER)))
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.APPROVED
    (grant,) = bot.services.grants.list()
    assert grant.scope == GrantScope.DAY
    assert grant.when.to_json() == NARROWER


def test_a_day_grant_needs_the_right(world: SlackWorld) -> None:
    """Without SIGNOFF_GRANT_APPROVERS naming them, an approver is told so; nothing changes."""
    bot = _bot(world)
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    seen = len(world.ephemerals(APPROVER))
    acked(bot.click(APPROVER, GRANT_DAY, world.card(refund.id)))
    (told,) = world.new_ephemerals(APPROVER, seen, drain=bot)
    assert "may not allow calls for 24 hours" in told
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING


def test_a_call_decided_by_a_rule_sends_no_direct_message(world: SlackWorld) -> None:
    """The refund a rule approves is not sent to the approver's DMs; the email still is."""
    rules = Rules.parse([{"id": "refunds", "tool": "issue_refund", "action": "auto_approve"}])
    bot = _bot(world, rules=rules)
    run_id = start_refund_run(world, bot)
    approvals = approvals_of(bot, run_id)
    assert approvals["issue_refund"].status == ApprovalStatus.APPROVED
    dms = json.dumps([m.blocks for m in world.dm(APPROVER)])
    assert approvals["send_email"].id in dms
    assert approvals["issue_refund"].id not in dms
