"""Batches in Slack: a turn's cards gathered under "Approve all (N)" / "Reject all"."""

from __future__ import annotations

from collections import Counter

from agent_runtime import ApprovalStatus, RunId, RunStatus
from bot.slack.batch_blocks import APPROVE_ALL, REJECT_ALL, REJECT_ALL_SUBMIT
from devkit.sandbox.slack_api import Message, View
from tests.integration.slack_harness import (
    APPROVER,
    BATCH_TASK,
    OUTSIDER,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import asked_in_order, buttons
from tests.integration.slack_steps import (
    acked,
    has_status,
    start_refund_run,
)


def batch_message(world: SlackWorld, run_id: RunId) -> Message:
    """Return the one message of the run's thread that offers Approve all."""
    found = [m for m in world.replies(run_id) if APPROVE_ALL in dict(buttons(m))]
    assert len(found) == 1, f"{len(found)} batch messages"
    return found[0]


def audit_actions(bot: BotInstance, approval_id: str) -> list[str]:
    """The audit log's actions on one approval, in order."""
    entries, _ = bot.services.approvals.store.audit_log()
    return [e.action for e in entries if e.approval_id == approval_id]


def test_approve_all_approves_each_call_of_the_turn_on_its_own(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Two refunds from one turn: the thread gathers them; one click approves each, audited
    each with its own hash, and both refunds run."""
    run_id = start_refund_run(world, bot, BATCH_TASK)
    first, second = asked_in_order(bot, run_id)
    batch = batch_message(world, run_id)
    texts = [m.text for m in world.replies(run_id)]
    assert texts[-1] == "2 calls from one model turn wait for sign-off", "after both cards"
    assert dict(buttons(batch)) == {
        APPROVE_ALL: f"{first.id}:{first.args_hash},{second.id}:{second.args_hash}",
        REJECT_ALL: f"{first.id},{second.id}",
    }

    acked(bot.click(APPROVER, APPROVE_ALL, batch))
    for approval in (first, second):
        decided = bot.decision(approval.id)
        assert decided.status == ApprovalStatus.APPROVED
        assert decided.decided_args_hash == approval.args_hash
        assert audit_actions(bot, approval.id) == ["requested", "approve"]
    told = world.new_ephemerals(APPROVER, 0, drain=bot)
    assert told[0].startswith("Recorded 2 of 2 calls.")

    bot.work()
    bot.drain()
    assert bot.services.runtime.get(run_id).status == RunStatus.COMPLETED
    charges = Counter(c.order_id for c in world.provider.ledger.charges())
    assert charges == Counter({"1042": 1, "1043": 1})


def test_approve_all_by_someone_not_allowed_decides_nothing(
    world: SlackWorld, bot: BotInstance
) -> None:
    """An outsider's Approve all changes nothing; each attempt is recorded as unauthorized."""
    run_id = start_refund_run(world, bot, BATCH_TASK)
    asked = asked_in_order(bot, run_id)

    acked(bot.click(OUTSIDER, APPROVE_ALL, batch_message(world, run_id)))
    told = world.new_ephemerals(OUTSIDER, 0, drain=bot)

    assert told[0].startswith("Nothing was recorded")
    for approval in asked:
        assert has_status(bot, approval.id, ApprovalStatus.PENDING)
        assert audit_actions(bot, approval.id) == ["requested", "unauthorized"]


def reject_all_modal(world: SlackWorld) -> View:
    """Wait for the one Reject all modal."""
    found = eventually(
        lambda: [
            v for v in world.workspace.views() if v.view.get("callback_id") == REJECT_ALL_SUBMIT
        ],
        what="the Reject all modal",
    )
    assert len(found) == 1
    return found[0]


def test_reject_all_asks_one_reason_and_rejects_each_call(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Reject all opens one modal; its reason rejects each call, and no refund runs."""
    run_id = start_refund_run(world, bot, BATCH_TASK)
    asked = asked_in_order(bot, run_id)

    acked(bot.click(APPROVER, REJECT_ALL, batch_message(world, run_id)))
    view = reject_all_modal(world)
    assert view.user == APPROVER
    empty = acked(bot.submit(APPROVER, view, " "))
    assert empty.json()["response_action"] == "errors"
    assert acked(bot.submit(APPROVER, view, "Both were goodwill already")).body == ""

    for approval in asked:
        rejected = bot.services.approvals.get(approval.id)
        assert (rejected.status, rejected.reason) == (
            ApprovalStatus.REJECTED,
            "Both were goodwill already",
        )
    bot.work()
    bot.drain()
    assert bot.services.runtime.get(run_id).status == RunStatus.COMPLETED
    assert world.provider.ledger.charges() == []


def test_a_turn_with_one_gated_call_has_no_batch(world: SlackWorld, bot: BotInstance) -> None:
    """A turn asking a single approval shows only its card, no Approve all."""
    run_id = start_refund_run(world, bot)
    assert [m for m in world.replies(run_id) if APPROVE_ALL in dict(buttons(m))] == []
