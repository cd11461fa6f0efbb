"""Signoff in Slack, end to end: signed requests to the real Bolt app, a fake Slack, real work.

Each scenario types ``/agent`` or clicks a card exactly as Slack would (signed form bodies
over HTTP to the Bolt app under WSGI), runs the worker and the outbox dispatcher by hand, and
checks what the people in the channel, in their DMs and in their modals would see, what the
database decided and what the payment provider's ledger says happened.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import ApprovalStatus, RunId, RunStatus
from bot.slack.blocks import APPROVE, EDIT, HISTORY, REJECT
from bot.slack.commands import HELP
from tests.integration.slack_harness import (
    ACK_LIMIT_S,
    APPROVER,
    OUTSIDER,
    REQUESTER,
    SECOND_APPROVER,
    SIGNING_SECRET,
    TASK,
    Ack,
    BotInstance,
    SlackWorld,
    approvals_of,
    block_texts,
    buttons,
    canonical_args,
    empty_postgres,
    eventually,
    outbox_rows,
    preformatted_text,
    run_id_of,
    sign,
    unescaped_markup,
)

APPROVAL_ID = re.compile(r"^[0-9a-f]{24}$")


@pytest.fixture
def world(tmp_path: Path, sqlite_url: str) -> Iterator[SlackWorld]:
    """The provider, the fake Slack and one Signoff instance on a fresh SQLite file."""
    with SlackWorld(tmp_path, sqlite_url) as built:
        built.instance()
        yield built


@pytest.fixture
def bot(world: SlackWorld) -> BotInstance:
    """The world's Signoff instance."""
    return world.instances[0]


def acked(ack: Ack) -> Ack:
    """Require Slack's acknowledgement: HTTP 200 within 3 s."""
    assert ack.status == 200, (ack.status, ack.body)
    assert ack.seconds < ACK_LIMIT_S, f"ack took {ack.seconds:.2f}s"
    return ack


def start_refund_run(world: SlackWorld, bot: BotInstance) -> RunId:
    """Type the refund task, run the worker to the approvals and deliver the notices."""
    run_id = run_id_of(acked(bot.command(TASK)))
    bot.work()
    bot.drain()
    assert bot.services.runtime.get(run_id).status == RunStatus.WAITING
    return run_id


def has_status(bot: BotInstance, approval_id: str, status: ApprovalStatus) -> bool:
    """Tell whether the approval has ``status`` now."""
    return bot.services.approvals.get(approval_id).status == status


def answer_of(bot: BotInstance, run_id: RunId) -> str:
    """Return the final answer of a completed run, as the agent gave it."""
    run = bot.services.runtime.get(run_id)
    assert run.status == RunStatus.COMPLETED, (run.status, run.error)
    assert isinstance(run.output, dict)
    return str(run.output["answer"])


def test_slash_command_starts_a_run_and_posts_the_thread_cards_and_dms(
    world: SlackWorld, bot: BotInstance
) -> None:
    """/agent <task> acks at once, starts a run, and the thread, cards and DMs appear."""
    ack = acked(bot.command(TASK))
    assert ack.json()["response_type"] == "ephemeral"
    run_id = run_id_of(ack)
    run = bot.services.runtime.get(run_id)
    assert run.status == RunStatus.PENDING
    assert run.input["task"] == TASK
    assert run.input["requester"]["user_id"] == REQUESTER
    assert world.roots() == [], "nothing is posted before the dispatcher runs"

    bot.work()
    bot.drain()

    root = world.root_of(run_id)
    assert root.text == f"<@{REQUESTER}> started a run of demo: {TASK}"
    assert buttons(root) == [(HISTORY, run_id)]
    replies = world.reply_texts(run_id)
    assert replies[0] == '🤖 Plans: `lookup_order`({"order_id": "1042"})'
    assert replies[1].startswith("🔧 `lookup_order` → ")
    assert '"amount_cents": 4999' in replies[1]
    assert replies[2].startswith("🤖 Plans: `issue_refund`(")
    assert "`send_email`(" in replies[2]

    approvals = approvals_of(bot, run_id)
    assert sorted(approvals) == ["issue_refund", "send_email"]
    dms = world.dm(APPROVER)
    assert len(dms) == 2
    for tool, approval in approvals.items():
        assert approval.status == ApprovalStatus.PENDING
        assert APPROVAL_ID.match(approval.id)
        card = world.card(approval.id)
        assert card.thread_ts == root.ts
        header = card.blocks[0] if card.blocks else {}
        assert header["type"] == "header"
        assert header["text"]["text"] == f"Approval needed: {tool}"
        assert preformatted_text(card) == canonical_args(approval.args)
        assert buttons(card) == [(APPROVE, approval.id), (REJECT, approval.id),
                                 (EDIT, approval.id)]
        assert f"<@{APPROVER}>" in block_texts(card)
        [dm] = [m for m in dms if buttons(m) and buttons(m)[0][1] == approval.id]
        assert dm.blocks == card.blocks
    assert world.dm(REQUESTER) == []
    assert world.dm(OUTSIDER) == []
    assert approvals["issue_refund"].args == {"order_id": "1042", "amount_cents": 4999}


def test_approve_updates_the_card_in_place_and_the_run_finishes(
    world: SlackWorld, bot: BotInstance
) -> None:
    """An approver's click edits the card in place, tells the thread, and the run completes."""
    run_id = start_refund_run(world, bot)
    approvals = approvals_of(bot, run_id)
    refund, email = approvals["issue_refund"], approvals["send_email"]
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
    line = (f"✅ Approved by <@{APPROVER}> at {now.decided_at:%H:%M UTC %b %d} "
            f"(args sha256 {now.decided_args_hash[:4]}…)")
    assert line in block_texts(updated)
    assert [c.params["ts"] for c in world.successful("chat.update")].count(card.ts) == 1
    assert f"*issue_refund*: {line}" in world.reply_texts(run_id)
    dm_card = world.card(refund.id, channel=world.dm(APPROVER)[0].channel)
    assert buttons(dm_card) == []
    assert line in block_texts(dm_card)

    assert bot.work() == 1
    assert bot.services.runtime.get(run_id).status == RunStatus.WAITING, "email still pending"
    assert world.provider.ledger.charges() == [], "the refund waits for the email's decision"
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
    eventually(lambda: len(world.ephemerals(OUTSIDER)) == 2 and world.ephemerals(REQUESTER),
               between=bot.drain, what="the refusals")
    assert world.ephemerals(OUTSIDER) == ["you are not allowed to decide this approval"] * 2
    assert world.ephemerals(REQUESTER) == ["you are not allowed to decide this approval"]
    assert world.ephemerals(APPROVER) == []
    assert all(e.channel == world.channel and e.thread_ts == card.thread_ts
               for e in world.workspace.ephemerals())
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)
    assert world.workspace.views() == [], "no modal for someone who may not decide"
    assert world.card(refund.id).edits == ()
    assert world.successful("chat.update") == []

    dm_card = world.card(refund.id, channel=world.dm(APPROVER)[0].channel)
    acked(bot.click(APPROVER, APPROVE, card))
    assert bot.decision(refund.id).status == ApprovalStatus.APPROVED
    bot.drain()
    # Late clicks on cards as the clickers' Slack clients still showed them.
    acked(bot.click(SECOND_APPROVER, APPROVE, card))
    acked(bot.click(APPROVER, APPROVE, dm_card))
    eventually(lambda: world.ephemerals(SECOND_APPROVER) and world.ephemerals(APPROVER),
               between=bot.drain, what="the late-click answers")
    when = bot.services.approvals.get(refund.id).decided_at
    assert when is not None
    late = f"already approved by dana at {when:%Y-%m-%d %H:%M} UTC"
    assert world.ephemerals(SECOND_APPROVER) == [late]
    assert world.ephemerals(APPROVER) == [late]
    assert [e.channel for e in world.workspace.ephemerals(user=APPROVER)] == [dm_card.channel]
    assert len(world.card(refund.id).edits) == 1, "late clicks do not touch the card"
    entries, _ = bot.services.approvals.store.audit_log()
    actions = [e.action for e in entries if e.approval_id == refund.id]
    assert actions == ["requested", "unauthorized", "unauthorized", "approve", "late", "late"]


def test_reject_asks_for_a_reason_in_a_modal_and_the_agent_reads_it(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Reject opens a modal; an empty reason is refused there; the reason reaches the agent."""
    run_id = start_refund_run(world, bot)
    approvals = approvals_of(bot, run_id)
    refund, email = approvals["issue_refund"], approvals["send_email"]
    card = world.card(refund.id)

    body, trigger = bot.click_body(APPROVER, REJECT, card)
    acked(bot.post(body))
    view = world.modal("approval.reject_submit", refund.id)
    assert view.trigger_id == trigger
    assert view.user == APPROVER
    assert view.view["callback_id"] == "approval.reject_submit"
    assert view.private_metadata == refund.id

    empty = acked(bot.submit(APPROVER, view, "   "))
    assert empty.json() == {"response_action": "errors",
                            "errors": {"reason": "Give the agent a reason."}}
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
    assert any(r.startswith("*issue_refund*: ❌ Rejected") and r.endswith(shown)
               for r in world.reply_texts(run_id))

    acked(bot.click(APPROVER, APPROVE, world.card(email.id)))
    assert bot.decision(email.id).status == ApprovalStatus.APPROVED
    bot.work()
    bot.drain()

    assert answer_of(bot, run_id) == (
        f"Order 1042: Refund: not executed: rejected by dana: {reason}; Email: done")
    assert world.provider.ledger.charges() == []
    assert unescaped_markup(world.posted()) == []


def test_edit_validates_in_the_modal_and_the_tool_runs_with_the_edited_arguments(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Edit: bad JSON/schema stays in the modal; a valid edit is approved and used as edited."""
    run_id = start_refund_run(world, bot)
    approvals = approvals_of(bot, run_id)
    refund, email = approvals["issue_refund"], approvals["send_email"]

    acked(bot.click(APPROVER, EDIT, world.card(refund.id)))
    view = world.modal("approval.edit_submit", refund.id)
    assert view.view["callback_id"] == "approval.edit_submit"
    assert view.private_metadata == refund.id
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
        '{"order_id": "1042", "amount_cents": 2000, "to": "me@example.com"}')
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)
    bot.drain()
    assert world.successful("chat.update") == []

    edited = {"order_id": "1042", "amount_cents": 2000}
    assert acked(bot.submit(APPROVER, view, json.dumps(edited))).body == ""
    now = bot.services.approvals.get(refund.id)
    assert now.status == ApprovalStatus.APPROVED
    assert now.decided_args == edited
    assert now.diff == [{"field": "amount_cents", "from": 4999, "to": 2000}]
    assert now.decided_args_hash is not None
    bot.drain()
    card = world.card(refund.id)
    assert f"(args sha256 {now.decided_args_hash[:4]}…) · edited: amount_cents" in block_texts(
        card)
    assert preformatted_text(card) == canonical_args(edited)

    acked(bot.click(APPROVER, APPROVE, world.card(email.id)))
    assert bot.decision(email.id).status == ApprovalStatus.APPROVED
    bot.work()
    bot.drain()
    assert bot.services.runtime.get(run_id).status == RunStatus.COMPLETED
    [charge] = world.provider.ledger.charges()
    assert (charge.order_id, charge.amount_cents) == ("1042", 2000)
    assert any('🔧 `issue_refund` → {"amount_cents": 2000' in r
               for r in world.reply_texts(run_id))


def test_agent_subcommands_answer_privately_with_sensible_text(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Each /agent subcommand acks 200 in 3 s with a sensible ephemeral answer; other text runs."""

    def say(command: str, user: str = REQUESTER, channel: str | None = None) -> str:
        ack = acked(bot.command(command, user=user, channel=channel))
        assert ack.json()["response_type"] == "ephemeral", ack.body
        return ack.text

    nudge = ("Tell me what to do, e.g. `/agent refund order 1042`. "
             "`/agent help` lists the commands.")
    assert say("") == nudge
    assert say("  \t ") == nudge
    assert say("help") == HELP
    assert say("Help") == HELP
    assert say("status") == "You have no runs yet. Start one with `/agent <task>`."
    assert say("list") == "No runs in this channel yet."
    assert say("run") == "The task is empty: `/agent run <task>`."
    assert say("history").startswith("`/agent history` needs a run id")
    assert say("status of my refund").endswith(
        "To start a run with this text, use `/agent run status …`.")
    assert say(f"status {uuid.uuid4().hex}").startswith("Sorry: ")
    assert bot.services.runtime.runs() == [], "none of those started a run"

    chatter = run_id_of(acked(bot.command("lisst the open refunds")))
    assert bot.services.runtime.get(chatter).input["task"] == "lisst the open refunds"
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]

    status = say(f"status {run_id}")
    assert status.startswith(f"Run `{run_id}`: *waiting* (waiting for `approval:")
    assert status.endswith(f"task: {TASK}")
    assert say(f"status `{uuid.UUID(run_id)}`") == status, "backticks and dashes are fine"
    assert say("status") == status, "the requester's latest run"
    listed = say("list")
    assert listed.splitlines() == [f"`{run_id}` waiting · {TASK}",
                                   f"`{chatter}` completed · lisst the open refunds"]
    other = world.workspace.add_channel("random").id
    assert say("list", channel=other) == "No runs in this channel yet."
    pending = say("pending", user=APPROVER).splitlines()
    assert len(pending) == 2
    assert f"`{refund.id}` *issue_refund* for run `{run_id}`, asked by <@{REQUESTER}>" in pending
    assert say("pending", user=OUTSIDER) == "Nothing is waiting on you."
    history = say(f"history {run_id}")
    assert history.startswith(f"*History of run* `{run_id}` (waiting): {TASK}")
    assert '🤖 Plans: `lookup_order`({"order_id": "1042"})' in history

    assert say(f"cancel {run_id}", user=OUTSIDER) == (
        "Sorry: only the person who started a run or its approvers may cancel it")
    assert bot.services.runtime.get(run_id).status == RunStatus.WAITING
    assert say(f"cancel {run_id}") == f"Cancelled run `{run_id}`."
    assert bot.services.runtime.get(run_id).status == RunStatus.CANCELLED
    assert say(f"cancel {run_id}").startswith(f"Sorry: cannot cancel run {run_id}")
    assert say(f"status {run_id}").startswith(f"Run `{run_id}`: *cancelled*")
    assert len(bot.services.runtime.runs()) == 2
    assert world.successful("chat.postEphemeral") == [], "answers travel in the HTTP ack"


UNTRUSTED_TASKS = [
    'refund "the blue one" and say \'sorry\'',
    "🎉 ship it 🚀 :tada: 👩🏽‍💻",
    "*bold* _italic_ ~strike~ `code` ```block``` > quote",
    "返金してください — Пожалуйста — مرحبا — שלום — नमस्ते",
    "<!channel> <!here> <!everyone> <@U_DANA> <#C0GENERAL> <https://evil.example|click> & co",
    ("<!channel> " * 150 + "x" * 3000)[:3000],
]


def test_untrusted_task_text_starts_runs_and_is_escaped_on_its_way_to_slack(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Odd task text starts runs verbatim; what reaches Slack carries no unescaped markup."""
    started = {}
    for task in UNTRUSTED_TASKS:
        run_id = run_id_of(acked(bot.command(task)))
        assert bot.services.runtime.get(run_id).input["task"] == task
        started[run_id] = task
    too_long = acked(bot.command("y" * 3001))
    assert too_long.text == "The task is longer than 3000 characters."
    assert len(bot.services.runtime.runs()) == len(UNTRUSTED_TASKS)

    bot.work()
    bot.drain()

    for run_id, task in started.items():
        assert bot.services.runtime.get(run_id).status == RunStatus.COMPLETED
        root = world.root_of(run_id)
        escaped = task.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        section = (root.blocks or [{}])[0]["text"]["text"]
        if len(task) < 500:
            assert root.text == f"<@{REQUESTER}> started a run of demo: {escaped}"
            assert section == f"*Task* from <@{REQUESTER}>\n{escaped}"
        else:
            assert len(section) <= 3000, "Slack's section limit"
            assert section.startswith(f"*Task* from <@{REQUESTER}>\n&lt;!channel&gt; ")
    for run_id in started:
        status = acked(bot.command(f"status {run_id}")).text
        assert unescaped_markup([status], allowed=[]) == [], status
    listed = acked(bot.command("list")).text
    assert "&lt;!channel&gt; &lt;!here&gt;" in listed
    assert "返金してください" in listed
    assert "🎉 ship it 🚀" in listed
    posted = world.posted()
    assert posted, "the runs reached Slack"
    only_the_requester = [f"<@{REQUESTER}>"]
    assert unescaped_markup([*posted, listed], allowed=only_the_requester) == []
    assert not [p for p in posted if "<!channel>" in p or "<!here>" in p]


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
        assert garbage.status in (401, 500), "refused (slack_sdk raises on a non-numeric one)"

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


@pytest.fixture
def pg_world(tmp_path: Path, pg_url: str) -> Iterator[SlackWorld]:
    """A world on the session's PostgreSQL database, emptied first, with two approvers."""
    empty_postgres(pg_url)
    with SlackWorld(tmp_path, pg_url, approvers=(APPROVER, SECOND_APPROVER)) as built:
        yield built


def race(*sends: tuple[BotInstance, bytes]) -> list[Ack]:
    """Post the requests at the same moment, one thread each; return the answers in order."""
    barrier = threading.Barrier(len(sends))
    answers: dict[int, Ack] = {}

    def send(index: int, bot: BotInstance, body: bytes) -> None:
        barrier.wait()
        answers[index] = bot.post(body)

    threads = [threading.Thread(target=send, args=(i, bot, body))
               for i, (bot, body) in enumerate(sends)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [answers[i] for i in range(len(sends))]


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
        assert sorted(approvals) == ["issue_refund", "send_email"]

        refund = approvals["issue_refund"]
        card = world.card(refund.id)
        seen = {user: len(world.ephemerals(user)) for user in (APPROVER, SECOND_APPROVER)}
        acks = race((first, first.click_body(APPROVER, APPROVE, card)[0]),
                    (second, second.click_body(SECOND_APPROVER, APPROVE, card)[0]))
        assert [acked(a).body for a in acks] == ["", ""]
        now = first.decision(refund.id)
        assert now.status == ApprovalStatus.APPROVED
        winner = now.decided_by
        assert winner is not None
        loser = SECOND_APPROVER if winner.user_id == APPROVER else APPROVER
        told = world.new_ephemerals(loser, seen[loser], drain=second)
        assert told == [f"already approved by {winner.name} at "
                        f"{now.decided_at:%Y-%m-%d %H:%M} UTC"]
        assert world.ephemerals(winner.user_id)[seen[winner.user_id]:] == []

        email = approvals["send_email"]
        card = world.card(email.id)
        acked(second.click(SECOND_APPROVER, REJECT, card))
        modal = world.modal("approval.reject_submit", email.id)
        seen = {user: len(world.ephemerals(user)) for user in (APPROVER, SECOND_APPROVER)}
        approve, reject = race(
            (first, first.click_body(APPROVER, APPROVE, card)[0]),
            (second, second.submit_body(SECOND_APPROVER, modal, "Not this week")))
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
            assert acked(reject).json() == {"response_action": "errors", "errors": {
                "reason": f"already approved by dana at {now.decided_at:%Y-%m-%d %H:%M} UTC"}}
            first.drain()
        assert world.ephemerals(SECOND_APPROVER)[seen[SECOND_APPROVER]:] == []

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


# -- product bugs: each test fails today and passes with the patch named in its reason --------


def approve_all(world: SlackWorld, bot: BotInstance, run_id: RunId) -> None:
    """Click Approve on each of the run's cards as the approver."""
    for approval in approvals_of(bot, run_id).values():
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


def test_cancel_closes_the_cards_and_tells_the_thread(
    world: SlackWorld, bot: BotInstance
) -> None:
    """After /agent cancel the thread says so and the run's cards can no longer approve."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    card = world.card(refund.id)
    assert acked(bot.command(f"cancel {run_id}")).text == f"Cancelled run `{run_id}`."
    bot.drain()
    acked(bot.click(APPROVER, APPROVE, card))
    eventually(lambda: world.ephemerals(APPROVER) or has_status(bot, refund.id,
                                                             ApprovalStatus.APPROVED),
               between=bot.drain, what="the click's outcome")
    assert bot.services.approvals.get(refund.id).status != ApprovalStatus.APPROVED
    [told] = world.ephemerals(APPROVER)
    assert told.startswith("already rejected by ")
    assert buttons(world.card(refund.id)) == []
    replies = world.reply_texts(run_id)
    assert "🛑 *Cancelled*" in replies
    assert any("the run was cancelled by" in text for text in replies)


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
