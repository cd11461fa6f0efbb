"""Signoff in Slack, end to end: approval cards, clicks, modals, and the runs they resume.

Each scenario types ``/agent`` or clicks a card exactly as Slack would (signed form bodies
over HTTP to the Bolt app under WSGI), runs the worker and the outbox dispatcher by hand, and
checks what the people in the channel, in their DMs and in their modals would see, what the
database decided and what the payment provider's ledger says happened.
"""

from __future__ import annotations

import json

from agent_runtime import ApprovalStatus, RunId, RunStatus
from bot.slack.blocks import APPROVE, EDIT, REJECT
from bot.slack.text import date
from tests.integration.slack_harness import (
    APPROVER,
    OUTSIDER,
    REQUESTER,
    SECOND_APPROVER,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import (
    approvals_of,
    block_texts,
    buttons,
    canonical_args,
    preformatted_text,
    unescaped_markup,
)
from tests.integration.slack_steps import (
    acked,
    has_status,
    start_refund_run,
)


def card_updates(world: SlackWorld) -> list[str]:
    """Return the ts of every message updated that is not a run's root (whose status moves)."""
    roots = {m.ts for m in world.roots()}
    return [c.params["ts"] for c in world.successful("chat.update") if c.params["ts"] not in roots]


def answer_of(bot: BotInstance, run_id: RunId) -> str:
    """Return the final answer of a completed run, as the agent gave it."""
    run = bot.services.runtime.get(run_id)
    assert run.status == RunStatus.COMPLETED, (run.status, run.error)
    assert isinstance(run.output, dict)
    return str(run.output["answer"])


def test_approve_updates_the_card_in_place_and_the_run_finishes(
    world: SlackWorld, bot: BotInstance
) -> None:
    """An approver's click edits the card in place, tells the thread, and the run completes."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    assert "send_email" not in approvals_of(bot, run_id), "no email before the refund is done"
    card = world.card(refund.id)

    acked(bot.click(APPROVER, APPROVE, card))
    assert bot.decision(refund.id).status == ApprovalStatus.APPROVED
    bot.drain()

    updated = world.card(refund.id)
    assert updated.ts == card.ts
    assert len(updated.edits) == 1
    assert buttons(updated) == []
    now = bot.services.approvals.get(refund.id)
    assert now.decided_by is not None
    assert now.decided_by.user_id == APPROVER
    assert now.decided_args_hash is not None
    assert now.decided_at is not None
    line = (
        f"✅ Approved by <@{APPROVER}> at {date(now.decided_at)} "
        f"(args sha256 {now.decided_args_hash[:4]}…)"
    )
    assert line in block_texts(updated)
    assert [c.params["ts"] for c in world.successful("chat.update")].count(card.ts) == 1
    assert f"*issue_refund*: {line}" in world.reply_texts(run_id)
    dm_card = world.card(refund.id, channel=world.dm(APPROVER)[0].channel)
    assert buttons(dm_card) == []
    assert line in block_texts(dm_card)

    assert bot.work() == 1
    assert bot.services.runtime.get(run_id).status == RunStatus.WAITING, "the email is asked"
    assert len(world.provider.ledger.charges()) == 1, "the refund ran once approved"
    email = approvals_of(bot, run_id)["send_email"]
    bot.drain()
    acked(bot.click(APPROVER, APPROVE, world.card(email.id)))
    assert bot.decision(email.id).status == ApprovalStatus.APPROVED
    bot.work()
    bot.drain()

    assert answer_of(bot, run_id) == "Order 1042: Refund: done; Email: done"
    assert any(r.startswith("🔧 `issue_refund` → ") for r in world.reply_texts(run_id))
    assert any(r.startswith("🔧 `send_email` → ") for r in world.reply_texts(run_id))
    [charge] = world.provider.ledger.charges()
    assert (charge.order_id, charge.amount_cents) == ("1042", 4999)
    assert charge.idempotency_key.startswith(f"signoff-{run_id}-")
    assert len(world.provider.ledger.emails()) == 1


def test_outsider_is_refused_privately_and_a_late_click_is_told_who_decided(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Outsiders are refused privately and change nothing; late clickers hear who decided."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    card = world.card(refund.id)

    acked(bot.click(OUTSIDER, APPROVE, card))
    acked(bot.click(OUTSIDER, EDIT, card))
    acked(bot.click(REQUESTER, APPROVE, card))
    eventually(
        lambda: len(world.ephemerals(OUTSIDER)) == 2 and world.ephemerals(REQUESTER),
        between=bot.drain,
        what="the refusals",
    )
    assert world.ephemerals(OUTSIDER) == ["you are not allowed to decide this approval"] * 2
    assert world.ephemerals(REQUESTER) == ["you are not allowed to decide this approval"]
    assert world.ephemerals(APPROVER) == []
    assert all(
        e.channel == world.channel and e.thread_ts == card.thread_ts
        for e in world.workspace.ephemerals()
    )
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)
    assert world.workspace.views() == [], "no modal for someone who may not decide"
    assert world.card(refund.id).edits == ()
    assert card_updates(world) == []

    dm_card = world.card(refund.id, channel=world.dm(APPROVER)[0].channel)
    acked(bot.click(APPROVER, APPROVE, card))
    assert bot.decision(refund.id).status == ApprovalStatus.APPROVED
    bot.drain()
    # Late clicks on cards as the clickers' Slack clients still showed them: an outsider
    # learns only that they may not decide; an approver hears who decided and when.
    acked(bot.click(SECOND_APPROVER, APPROVE, card))
    eventually(
        lambda: world.ephemerals(SECOND_APPROVER),
        between=bot.drain,
        what="the outsider's late-click answer",
    )
    acked(bot.click(APPROVER, APPROVE, dm_card))
    eventually(
        lambda: world.ephemerals(APPROVER),
        between=bot.drain,
        what="the approver's late-click answer",
    )
    when = bot.services.approvals.get(refund.id).decided_at
    assert when is not None
    late = f"already approved by dana at {when:%Y-%m-%d %H:%M} UTC"
    assert world.ephemerals(SECOND_APPROVER) == ["you are not allowed to decide this approval"]
    assert world.ephemerals(APPROVER) == [late]
    assert [e.channel for e in world.workspace.ephemerals(user=APPROVER)] == [dm_card.channel]
    assert len(world.card(refund.id).edits) == 1, "late clicks do not touch the card"
    entries, _ = bot.services.approvals.store.audit_log()
    actions = [e.action for e in entries if e.approval_id == refund.id]
    assert actions == [
        "requested",
        "unauthorized",
        "unauthorized",
        "approve",
        "unauthorized",
        "late",
    ]


def test_reject_asks_for_a_reason_in_a_modal_and_the_agent_reads_it(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Reject opens a modal; an empty reason is refused there; the reason reaches the agent."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    card = world.card(refund.id)

    body, trigger = bot.click_body(APPROVER, REJECT, card)
    acked(bot.post(body))
    view = world.modal("approval.reject_submit", refund.id)
    assert view.trigger_id == trigger
    assert view.user == APPROVER
    assert view.view["callback_id"] == "approval.reject_submit"
    assert view.private_metadata == refund.id

    empty = acked(bot.submit(APPROVER, view, "   "))
    assert empty.json() == {
        "response_action": "errors",
        "errors": {"reason": "Give the agent a reason."},
    }
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)

    reason = "Customer already got a voucher <!channel> & a call"
    accepted = acked(bot.submit(APPROVER, view, reason))
    assert accepted.body == ""
    rejected = bot.services.approvals.get(refund.id)
    assert rejected.status == ApprovalStatus.REJECTED
    assert rejected.reason == reason
    bot.drain()
    shown = "“Customer already got a voucher &lt;!channel&gt; &amp; a call”"
    assert buttons(world.card(refund.id)) == []
    assert f"❌ Rejected by <@{APPROVER}>" in block_texts(world.card(refund.id))
    assert shown in block_texts(world.card(refund.id))
    assert any(
        r.startswith("*issue_refund*: ❌ Rejected") and r.endswith(shown)
        for r in world.reply_texts(run_id)
    )

    bot.work()
    bot.drain()

    assert answer_of(bot, run_id) == (
        f"Order 1042: Refund: not executed: rejected by dana: {reason}; "
        "Email: not sent, as no refund was made"
    )
    assert "send_email" not in approvals_of(bot, run_id), "no email claims a refund not made"
    assert world.provider.ledger.charges() == []
    assert unescaped_markup(world.posted()) == []


def test_edit_validates_in_the_modal_and_the_tool_runs_with_the_edited_arguments(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Edit: bad JSON/schema stays in the modal; a valid edit is approved and used as edited."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]

    acked(bot.click(APPROVER, EDIT, world.card(refund.id)))
    view = world.modal("approval.edit_submit", refund.id)
    assert view.view["callback_id"] == "approval.edit_submit"
    assert view.private_metadata == f"{refund.id}:{refund.args_hash}"
    [field] = [b for b in view.view["blocks"] if b["type"] == "input"]
    assert field["element"]["initial_value"] == canonical_args(refund.args)

    def errors(value: str) -> str:
        answer = acked(bot.submit(APPROVER, view, value)).json()
        assert answer["response_action"] == "errors", answer
        return str(answer["errors"]["args"])

    assert errors('{"order_id": "1042", "amount_cents": 20').startswith("Not valid JSON")
    assert errors("[1042, 2000]") == "The arguments must be a JSON object."
    assert "amount_cents" in errors('{"order_id": "1042", "amount_cents": "twenty"}')
    assert "order_id" in errors('{"amount_cents": 2000}')
    assert "'to' was unexpected" in errors(
        '{"order_id": "1042", "amount_cents": 2000, "to": "me@example.com"}'
    )
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)
    bot.drain()
    assert card_updates(world) == []

    edited = {"order_id": "1042", "amount_cents": 2000}
    assert acked(bot.submit(APPROVER, view, json.dumps(edited))).body == ""
    now = bot.services.approvals.get(refund.id)
    assert now.status == ApprovalStatus.APPROVED
    assert now.decided_args == edited
    assert now.diff == [{"field": "amount_cents", "from": 4999, "to": 2000}]
    assert now.decided_args_hash is not None
    bot.drain()
    card = world.card(refund.id)
    assert f"(args sha256 {now.decided_args_hash[:4]}…) · edited: amount_cents" in block_texts(card)
    assert preformatted_text(card) == canonical_args(edited)

    approve_all(world, bot, run_id)
    assert bot.services.runtime.get(run_id).status == RunStatus.COMPLETED
    [charge] = world.provider.ledger.charges()
    assert (charge.order_id, charge.amount_cents) == ("1042", 2000)
    assert any('🔧 `issue_refund` → {"amount_cents": 2000' in r for r in world.reply_texts(run_id))


def approve_all(world: SlackWorld, bot: BotInstance, run_id: RunId) -> None:
    """Run the run, clicking Approve as the approver on each card it asks, until it asks
    nothing more."""
    while True:
        bot.work()
        bot.drain()
        pending = approvals_of(bot, run_id, ApprovalStatus.PENDING).values()
        if not pending:
            return
        for approval in pending:
            acked(bot.click(APPROVER, APPROVE, world.card(approval.id)))
            assert bot.decision(approval.id).status == ApprovalStatus.APPROVED


def test_the_final_answer_is_posted_in_the_thread(world: SlackWorld, bot: BotInstance) -> None:
    """Once approved and resumed, the run's final answer is the last reply of its thread."""
    run_id = start_refund_run(world, bot)
    approve_all(world, bot, run_id)
    bot.work()
    bot.drain()
    assert answer_of(bot, run_id) == "Order 1042: Refund: done; Email: done"
    assert world.reply_texts(run_id)[-1] == "✅ *Done:* Order 1042: Refund: done; Email: done"


def test_a_run_on_postgresql_resumes_after_its_approvals(pg_world: SlackWorld) -> None:
    """On PostgreSQL too, an approved run resumes on the worker and refunds exactly once."""
    bot = pg_world.instance()
    run_id = start_refund_run(pg_world, bot)
    approve_all(pg_world, bot, run_id)
    bot.work()
    assert answer_of(bot, run_id) == "Order 1042: Refund: done; Email: done"
    assert len(pg_world.provider.ledger.charges()) == 1


def test_cancel_closes_the_cards_and_tells_the_thread(world: SlackWorld, bot: BotInstance) -> None:
    """After /agent cancel the thread says so and the run's cards can no longer approve."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    card = world.card(refund.id)
    assert acked(bot.command(f"cancel {run_id}")).text == f"Cancelled run `{run_id}`."
    bot.drain()
    acked(bot.click(APPROVER, APPROVE, card))
    eventually(
        lambda: world.ephemerals(APPROVER) or has_status(bot, refund.id, ApprovalStatus.APPROVED),
        between=bot.drain,
        what="the click's outcome",
    )
    assert bot.services.approvals.get(refund.id).status != ApprovalStatus.APPROVED
    [told] = world.ephemerals(APPROVER)
    assert told.startswith("already cancelled by ")
    assert "🛑 Cancelled by " in block_texts(world.card(refund.id))
    assert buttons(world.card(refund.id)) == []
    replies = world.reply_texts(run_id)
    assert "🛑 *Cancelled*" in replies
    assert any("the run was cancelled by" in text for text in replies)
