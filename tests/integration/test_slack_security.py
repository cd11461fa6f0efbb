"""Signoff in Slack, end to end: forged, stale and replayed requests, and racing instances.

Each scenario types ``/agent`` or clicks a card exactly as Slack would (signed form bodies
over HTTP to the Bolt app under WSGI), runs the worker and the outbox dispatcher by hand, and
checks what the people in the channel, in their DMs and in their modals would see, what the
database decided and what the payment provider's ledger says happened.
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

from agent_runtime import ApprovalStatus
from bot.slack.blocks import APPROVE, REJECT
from tests.integration.slack_harness import (
    APPROVER,
    SECOND_APPROVER,
    SIGNING_SECRET,
    TASK,
    BotInstance,
    SlackWorld,
    sign,
)
from tests.integration.slack_readers import (
    approvals_of,
    buttons,
    outbox_rows,
    run_id_of,
)
from tests.integration.slack_steps import (
    acked,
    has_status,
    race,
    start_refund_run,
)


def test_forged_or_stale_requests_are_refused_and_change_nothing(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Bad signatures and timestamps > 5 min off get 401; nothing is started or decided."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    card = world.card(refund.id)
    calls_before = len(world.workspace.calls())
    outbox_before = len(outbox_rows(bot))

    command = bot.command_body("refund order 1043")
    click, _ = bot.click_body(APPROVER, APPROVE, card)
    for body in (command, click):
        stamp = int(time.time())
        tampered = sign(SIGNING_SECRET, str(stamp), body + b"&user_id=U_DANA")
        refusals = [
            bot.post(body, secret="not-the-signing-secret"),
            bot.post(body, signature="v0=" + "0" * 64),
            bot.post(body, signature=""),
            bot.post(body, timestamp=stamp, signature=tampered),
            bot.post(body, timestamp=int(time.time()) - 301),
            bot.post(body, timestamp=int(time.time()) + 310),  # 5 min ahead, with a margin
            bot.post(body, timestamp=int(time.time()) - 3600),
        ]
        assert [r.status for r in refusals] == [401] * len(refusals)
        garbage = bot.post(body, headers={"X-Slack-Request-Timestamp": "not-a-number"})
        assert garbage.status == 401, "a timestamp that is not a number is refused too"

    time.sleep(0.2)  # a listener that wrongly ran would have acted by now
    assert [r.id for r in bot.services.runtime.runs()] == [run_id]
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)
    assert len(outbox_rows(bot)) == outbox_before
    bot.drain()
    assert len(world.workspace.calls()) == calls_before
    assert world.workspace.ephemerals() == []

    accepted = acked(bot.post(command, timestamp=int(time.time()) - 290))
    assert accepted.text.startswith("Started run"), "signed and recent enough: accepted"
    assert len(bot.services.runtime.runs()) == 2


def test_two_instances_race_for_one_approval_and_exactly_one_decision_wins(
    pg_world: SlackWorld,
) -> None:
    """Two instances, two approvers, simultaneous decisions: one wins, the loser is told."""
    world = pg_world
    first, second = world.instance(), world.instance(migrate=False)
    run_ids = [run_id_of(acked(first.command(TASK))) for _ in range(3)]
    first.work()
    first.drain()

    for run_id in run_ids:
        approvals = approvals_of(first, run_id)
        assert sorted(approvals) == ["issue_refund"]

        refund = approvals["issue_refund"]
        card = world.card(refund.id)
        seen = {user: len(world.ephemerals(user)) for user in (APPROVER, SECOND_APPROVER)}
        acks = race(
            (first, first.click_body(APPROVER, APPROVE, card)[0]),
            (second, second.click_body(SECOND_APPROVER, APPROVE, card)[0]),
        )
        assert [acked(a).body for a in acks] == ["", ""]
        now = first.decision(refund.id)
        assert now.status == ApprovalStatus.APPROVED
        winner = now.decided_by
        assert winner is not None
        loser = SECOND_APPROVER if winner.user_id == APPROVER else APPROVER
        told = world.new_ephemerals(loser, seen[loser], drain=second)
        assert told == [f"already approved by {winner.name} at {now.decided_at:%Y-%m-%d %H:%M} UTC"]
        assert world.ephemerals(winner.user_id)[seen[winner.user_id] :] == []

        first.work()  # the refund runs; the email telling of it is asked next
        first.drain()
        email = approvals_of(first, run_id)["send_email"]
        card = world.card(email.id)
        acked(second.click(SECOND_APPROVER, REJECT, card))
        modal = world.modal("approval.reject_submit", email.id)
        seen = {user: len(world.ephemerals(user)) for user in (APPROVER, SECOND_APPROVER)}
        approve, reject = race(
            (first, first.click_body(APPROVER, APPROVE, card)[0]),
            (second, second.submit_body(SECOND_APPROVER, modal, "Not this week")),
        )
        assert acked(approve).body == ""
        now = first.decision(email.id)
        if now.status == ApprovalStatus.REJECTED:
            assert acked(reject).body == "", "the rejection won: the modal closes"
            assert now.decided_by is not None
            assert now.decided_by.user_id == SECOND_APPROVER
            told = world.new_ephemerals(APPROVER, seen[APPROVER], drain=first)
            assert told == [f"already rejected by erin at {now.decided_at:%Y-%m-%d %H:%M} UTC"]
        else:
            assert now.status == ApprovalStatus.APPROVED
            assert acked(reject).json() == {
                "response_action": "errors",
                "errors": {
                    "reason": f"already approved by dana at {now.decided_at:%Y-%m-%d %H:%M} UTC"
                },
            }
            first.drain()
        assert world.ephemerals(SECOND_APPROVER)[seen[SECOND_APPROVER] :] == []

    entries, _ = first.services.approvals.store.audit_log()
    decisions = [e for e in entries if e.action in ("approve", "reject")]
    assert len(decisions) == 6, "one decision per approval"
    assert len({e.approval_id for e in decisions}) == 6
    assert len([e for e in entries if e.action == "late"]) == 6, "one loser per approval"
    second.drain()
    for run_id in run_ids:
        for approval in approvals_of(first, run_id).values():
            card = world.card(approval.id)
            assert buttons(card) == []
            assert len(card.edits) == 1, "the card was updated once, by the winner's decision"


def test_a_replayed_request_is_refused_and_changes_nothing(
    world: SlackWorld, bot: BotInstance
) -> None:
    """The same signed request sent twice (a replay) is handled once: one run, then a 401."""
    body = bot.command_body("refund order 1043")
    stamp = int(time.time())
    first = bot.post(body, timestamp=stamp)
    runs_after_first = len(bot.services.runtime.runs())
    replay = bot.post(body, timestamp=stamp)
    assert first.status == 200
    assert replay.status == 401
    assert len(bot.services.runtime.runs()) == runs_after_first == 1


def test_malformed_payloads_get_a_clear_answer_and_change_nothing(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Signed but malformed requests are answered without a crash and record nothing; a
    click on an approval that does not exist is told so."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    card = world.card(refund.id)
    audit_before = len(bot.services.approvals.store.audit_log()[0])
    outbox_before = len(outbox_rows(bot))
    unknown_approval, _ = bot.click_body(APPROVER, APPROVE, card, value="f" * 24)
    answers = [
        bot.post(b"payload=not-json"),
        bot.post(b"payload=" + urlencode_value({"type": "block_actions"})),
        bot.post(b"command=%2Fagent"),
        bot.post(b"", content_type="application/json"),
        bot.post(unknown_approval),
    ]
    assert all(a.status < 500 for a in answers), [(a.status, a.text) for a in answers]
    told = world.new_ephemerals(APPROVER, 0, drain=bot)
    assert told == ["Sorry: there is no such approval, or it is not yours to see."]
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING
    assert len(bot.services.approvals.store.audit_log()[0]) == audit_before
    assert [r["kind"] for r in outbox_rows(bot)[outbox_before:]] == ["ephemeral"]
    assert len(bot.services.runtime.runs()) == 1


def urlencode_value(payload: dict[str, object]) -> bytes:
    """The form-encoded JSON of ``payload``, as Slack sends interactivity."""
    return quote(json.dumps(payload)).encode()
