"""Signoff in Slack, end to end: ``/agent`` and its subcommands, and the task text it is given.

Each scenario types ``/agent`` or clicks a card exactly as Slack would (signed form bodies
over HTTP to the Bolt app under WSGI), runs the worker and the outbox dispatcher by hand, and
checks what the people in the channel, in their DMs and in their modals would see, what the
database decided and what the payment provider's ledger says happened.
"""

from __future__ import annotations

import json
import re
import uuid

from agent_runtime import ApprovalStatus, RunStatus
from bot.slack.blocks import (
    APPROVE,
    EDIT,
    FORK,
    GRANT_DAY,
    GRANT_RUN,
    HISTORY,
    REJECT,
    VIEW_ARGS,
    WHY,
)
from bot.slack.commands import HELP
from tests.integration.slack_harness import (
    APPROVER,
    OUTSIDER,
    REQUESTER,
    TASK,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import (
    approvals_of,
    block_texts,
    buttons,
    run_id_of,
    unescaped_markup,
)
from tests.integration.slack_steps import (
    acked,
    start_refund_run,
)

APPROVAL_ID = re.compile(r"^[0-9a-f]{24}$")


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
    assert root.text.splitlines()[0] == f"<@{REQUESTER}> started a run of demo: {TASK}"
    assert buttons(root) == [(HISTORY, run_id)]
    replies = world.reply_texts(run_id)
    assert replies[0] == '🤖 Plans: `lookup_order`({"order_id": "1042"})'
    assert replies[1].startswith("🔧 `lookup_order` → ")
    assert '"amount_cents": 4999' in replies[1]
    assert replies[2].startswith("🤖 Plans: `issue_refund`(")
    assert "`send_email`(" not in replies[2], "the email waits for the refund"

    approvals = approvals_of(bot, run_id)
    assert sorted(approvals) == ["issue_refund"]
    dms = world.dm(APPROVER)
    assert len(dms) == 1
    for tool, approval in approvals.items():
        assert approval.status == ApprovalStatus.PENDING
        assert APPROVAL_ID.match(approval.id)
        card = world.card(approval.id)
        assert card.thread_ts == root.ts
        header = card.blocks[0] if card.blocks else {}
        assert header["type"] == "header"
        assert header["text"]["text"] == f"Approval needed: {tool}"
        assert "*What it will do*\nRefund 49.99 USD to Dana Example for order 1042" in (
            block_texts(card)
        )
        shown = f"{approval.id}:{approval.args_hash}"
        assert buttons(card) == [
            (APPROVE, shown),
            (REJECT, approval.id),
            (EDIT, approval.id),
            (GRANT_RUN, shown),
            (GRANT_DAY, shown),
            (VIEW_ARGS, approval.id),
            (WHY, approval.id),
        ]
        assert f"<@{APPROVER}>" in block_texts(card)
        [dm] = [m for m in dms if buttons(m) and buttons(m)[0][1] == shown]
        assert dm.blocks == card.blocks
    assert world.dm(REQUESTER) == []
    assert world.dm(OUTSIDER) == []
    assert approvals["issue_refund"].args == {"order_id": "1042", "amount_cents": 4999}


def test_agent_subcommands_answer_privately_with_sensible_text(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Each /agent subcommand acks 200 in 3 s with a sensible ephemeral answer; other text runs."""

    def say(command: str, user: str = REQUESTER, channel: str | None = None) -> str:
        ack = acked(bot.command(command, user=user, channel=channel))
        assert ack.json()["response_type"] == "ephemeral", ack.body
        return ack.text

    nudge = "Tell me what to do, e.g. `/agent refund order 1042`. `/agent help` lists the commands."
    assert say("") == nudge
    assert say("  \t ") == nudge
    assert say("help") == HELP
    assert say("Help") == HELP
    assert say("status") == "You have no runs yet. Start one with `/agent &lt;task&gt;`."
    assert say("list") == "No runs in this channel yet."
    assert say("run") == "The task is empty: `/agent run &lt;task&gt;`."
    assert say("history").startswith("`/agent history` needs a run id")
    assert say("status of my refund").endswith(
        "To start a run with this text, use `/agent run status …`."
    )
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
    assert listed.splitlines() == [
        f"`{run_id}` waiting · {TASK}",
        f"`{chatter}` completed · lisst the open refunds",
    ]
    other = world.workspace.add_channel("random").id
    assert say("list", channel=other) == "No runs in this channel yet."
    pending = say("pending", user=APPROVER).splitlines()
    assert len(pending) == 1
    assert f"`{refund.id}` *issue_refund* for run `{run_id}`, asked by <@{REQUESTER}>" in pending
    assert say("pending", user=OUTSIDER) == "Nothing is waiting on you."
    history = say(f"history {run_id}")
    assert history.startswith(f"*History of run* `{run_id}` (waiting): {TASK}")
    assert '🤖 Plans: `lookup_order`({"order_id": "1042"})' in history

    assert say(f"cancel {run_id}", user=OUTSIDER) == (
        "Sorry: only the person who started a run or its approvers may cancel it"
    )
    assert bot.services.runtime.get(run_id).status == RunStatus.WAITING
    assert say(f"cancel {run_id}") == f"Cancelled run `{run_id}`."
    assert bot.services.runtime.get(run_id).status == RunStatus.CANCELLED
    assert say(f"cancel {run_id}").startswith(f"Sorry: cannot cancel run {run_id}")
    assert say(f"status {run_id}").startswith(f"Run `{run_id}`: *cancelled*")
    assert len(bot.services.runtime.runs()) == 2
    assert world.successful("chat.postEphemeral") == [], "answers travel in the HTTP ack"


UNTRUSTED_TASKS = [
    "refund \"the blue one\" and say 'sorry'",
    "🎉 ship it 🚀 :tada: 👩🏽‍💻",
    "*bold* _italic_ ~strike~ `code` ```block``` > quote",
    "返金してください — Пожалуйста — مرحبا — שלום — नमस्ते",
    "<!channel> <!here> <!everyone> <@U_DANA> <#C0GENERAL> <https://evil.example|click> & co",
    ("<!channel> " * 150 + "x" * 3000)[:3000],
]


def test_a_direction_override_in_a_task_reaches_slack_as_a_visible_escape(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A task with U+202E and U+200B runs as typed; its root message shows both as escapes."""
    task = "refund order 1042 to \u202eexample.com@evil\u200b"
    run_id = run_id_of(acked(bot.command(task)))
    assert bot.services.runtime.get(run_id).input["task"] == task
    bot.drain()
    root = world.root_of(run_id)
    shown = "refund order 1042 to \\u202eexample.com@evil\\u200b"
    assert root.text is not None
    assert root.text.splitlines()[0].endswith(shown)
    assert (root.blocks or [{}])[0]["text"]["text"].endswith(shown)


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
            assert root.text.splitlines()[0] == f"<@{REQUESTER}> started a run of demo: {escaped}"
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


def test_fork_from_here_in_the_history_starts_a_fork_in_its_own_thread(
    world: SlackWorld, bot: BotInstance
) -> None:
    """History offers "Fork from here" on model calls; the requester's click forks the run."""
    run_id = start_refund_run(world, bot)
    ack = acked(bot.command(f"history {run_id}"))
    offered = [
        b["accessory"]["value"]
        for b in ack.json()["blocks"]
        if b.get("accessory", {}).get("action_id") == FORK
    ]
    model_steps = [s.position for s in bot.services.runtime.journal(run_id) if s.name == "model"]
    assert offered == [f"{run_id}:{p}" for p in model_steps]

    seen = len(world.workspace.ephemerals(user=OUTSIDER))
    bot.click(OUTSIDER, HISTORY, world.root_of(run_id))
    world.new_ephemerals(OUTSIDER, seen, drain=bot)
    history = world.workspace.ephemerals(user=OUTSIDER)[-1]
    bot.click_ephemeral(OUTSIDER, FORK, history, value=f"{run_id}:{model_steps[-1]}")
    refusal = world.new_ephemerals(OUTSIDER, seen + 1, drain=bot)
    assert refusal == ["Sorry: only the person who started a run or its approvers may fork it"]
    assert bot.services.runtime.forks(run_id) == []

    seen = len(world.workspace.ephemerals(user=REQUESTER))
    bot.click(REQUESTER, HISTORY, world.root_of(run_id))
    world.new_ephemerals(REQUESTER, seen, drain=bot)
    history = world.workspace.ephemerals(user=REQUESTER)[-1]
    bot.click_ephemeral(REQUESTER, FORK, history, value=f"{run_id}:{model_steps[-1]}")
    (told,) = world.new_ephemerals(REQUESTER, seen + 1, drain=bot)
    (fork,) = bot.services.runtime.forks(run_id)
    assert told == (
        f"Forked run `{fork.id}` from step {model_steps[-1]} of `{run_id}`; "
        "it continues in its own thread."
    )
    assert (fork.forked_from, fork.fork_at) == (run_id, model_steps[-1])
    bot.work()
    bot.drain()
    root = world.root_of(fork.id)
    assert root.text.splitlines()[0] == f"<@{REQUESTER}> started a run of demo: {TASK}"
    assert f"fork of `{run_id}` from step {model_steps[-1]}" in json.dumps(root.blocks)
    assert bot.services.runtime.get(fork.id).status == RunStatus.WAITING
    assert len(approvals_of(bot, fork.id)) == 1, "the fork asks for its own approval"


def test_a_run_is_shown_in_its_channel_and_to_its_people_only(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Elsewhere, /agent status|history RUN answer an outsider as if the run did not exist."""
    run_id = start_refund_run(world, bot)
    other = world.workspace.add_channel("elsewhere").id
    hidden = f"Sorry: no run with id {run_id}"

    def say(command: str, user: str, channel: str | None = None) -> str:
        return acked(bot.command(command, user=user, channel=channel)).text

    for command in (f"status {run_id}", f"history {run_id}"):
        assert say(command, OUTSIDER, other) == hidden
        assert say(command, OUTSIDER) != hidden, "shown in the channel it was started from"
        assert say(command, REQUESTER, other) != hidden, "and to the person who started it"
        assert say(command, APPROVER, other) != hidden, "and to its approvers"
    assert say(f"status {uuid.uuid4().hex}", OUTSIDER, other).startswith("Sorry: no run with id")
