"""The budget card in Slack, end to end: signed clicks and modal submissions into the real
Bolt app, the sandbox Slack, real databases.

A demo refund run is started as ``/agent`` starts it, with a $0.0015 budget: its first model
call ($0.0012) fits, its second does not, so the run stops and its thread gets the card.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from agent_runtime import (
    Actor,
    AgentInput,
    Approval,
    ApprovalStatus,
    Budget,
    RunId,
    RunStatus,
)
from agent_runtime.approvals import ApprovalKind
from bot.slack.blocks import APPROVE
from bot.slack.budget_blocks import AMOUNT_SUBMIT, BUDGET_END, BUDGET_RAISE
from tests.integration import cli_ok, signoff_env
from tests.integration.slack_harness import (
    APPROVER,
    NOWHERE,
    OUTSIDER,
    PEOPLE,
    REQUESTER,
    SECOND_APPROVER,
    TASK,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import block_texts, buttons
from tests.integration.slack_steps import (
    acked,
    race,
)

BUDGET_USD = 0.0015
"""Room for the demo's first model call ($0.0012) and not its second."""


def start_exhausting_run(world: SlackWorld, bot: BotInstance) -> tuple[RunId, Approval]:
    """Start the refund run with a $0.0015 budget, as ``/agent`` would; work it until its
    budget stops it and deliver the thread; return it and its budget approval."""
    ws = world.workspace
    data = AgentInput(
        task=TASK,
        requester=Actor(user_id=REQUESTER, team_id=ws.team_id, name=PEOPLE[REQUESTER]),
        budget=Budget(cost_usd=BUDGET_USD, model_calls=20),
        context={"slack": {"channel": world.channel, "team": ws.team_id, "response_url": NOWHERE}},
    ).to_json()
    run = bot.services.runtime.start(bot.services.agents.get().workflow, data)
    bot.work()
    bot.drain()
    [asked] = bot.services.approvals.store.list_approvals(
        run_id=run.id, status=ApprovalStatus.PENDING
    )
    assert asked.kind == ApprovalKind.BUDGET
    return run.id, asked


def submission(world: SlackWorld, user: str, view: dict[str, Any], typed: str = "") -> bytes:
    """The form body of ``user`` submitting ``view`` (with ``typed`` in its input, if any)."""
    ws = world.workspace
    state = {
        b["block_id"]: {b["element"]["action_id"]: {"type": "plain_text_input", "value": typed}}
        for b in view["blocks"]
        if b["type"] == "input"
    }
    payload = {
        "type": "view_submission",
        "team": {"id": ws.team_id, "domain": ws.domain},
        "user": {"id": user, "username": PEOPLE[user], "name": PEOPLE[user], "team_id": ws.team_id},
        "api_app_id": ws.app_id,
        "token": "legacy-verification-token",
        "trigger_id": ws.issue_trigger(user),
        "view": {**view, "state": {"values": state}},
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def open_raise(world: SlackWorld, bot: BotInstance, user: str, asked: Approval) -> Any:
    """Click "Raise by …" on the card as ``user`` and return the modal it opens."""
    seen = {v.id for v in world.workspace.views()}
    acked(bot.click(user, BUDGET_RAISE, world.card(asked.id)))

    def opened() -> list[Any]:
        return [v for v in world.workspace.views() if v.id not in seen and v.user == user]

    [modal] = eventually(opened, what=f"the raise modal of {user}")
    assert modal.view["callback_id"] == AMOUNT_SUBMIT
    return modal.view


def confirm_view(world: SlackWorld, bot: BotInstance, user: str, asked: Approval, by: str) -> Any:
    """Open the raise modal as ``user``, submit ``by``, and return the confirmation view the
    submit is answered with."""
    modal = open_raise(world, bot, user, asked)
    answer = acked(bot.post(submission(world, user, modal, by))).json()
    assert answer["response_action"] == "update", answer
    return answer["view"]


def audit_actions(bot: BotInstance, approval_id: str) -> list[tuple[str, str]]:
    """The audit log's (action, user) entries about ``approval_id``, in order."""
    entries, _ = bot.services.approvals.store.audit_log()
    return [
        (e.action, (e.actor or {}).get("user_id", ""))
        for e in entries
        if e.approval_id == approval_id
    ]


def budget_cards_posted(world: SlackWorld, approval_id: str) -> dict[str, int]:
    """How many times the card of ``approval_id`` was posted (not updated), by channel."""
    posted: dict[str, int] = {}
    for call in world.successful("chat.postMessage"):
        if f"approval `{approval_id}`" in json.dumps(call.params.get("blocks") or []):
            posted[call.params["channel"]] = posted.get(call.params["channel"], 0) + 1
    return posted


def approve_the_rest(world: SlackWorld, bot: BotInstance, run_id: RunId) -> None:
    """Click Approve on each card the run asks for until it ends."""
    while (run := bot.services.runtime.get(run_id)).status == RunStatus.WAITING:
        pending = bot.services.approvals.store.list_approvals(
            run_id=run_id, status=ApprovalStatus.PENDING
        )
        for approval in pending:
            acked(bot.click(APPROVER, APPROVE, world.card(approval.id)))
            bot.decision(approval.id)
        bot.work()
        bot.drain()
    assert run.status == RunStatus.COMPLETED, run.error


def test_exhaustion_posts_the_card_once_and_only_an_approver_raise_resumes_the_run(
    world: SlackWorld, bot: BotInstance
) -> None:
    """One card; an outsider's clicks are refused and audited; an approver's raise, shown
    again before it is submitted, resumes the run; `signoff audit verify` passes."""
    run_id, asked = start_exhausting_run(world, bot)
    card = world.card(asked.id)
    assert [a for a, _ in buttons(card)] == [BUDGET_RAISE, BUDGET_END]
    assert "all 1 calls" in block_texts(card)
    bot.work()
    bot.drain()
    dm = world.dm(APPROVER)[0].channel
    assert budget_cards_posted(world, asked.id) == {world.channel: 1, dm: 1}

    acked(bot.click(OUTSIDER, BUDGET_RAISE, card))
    acked(bot.click(OUTSIDER, BUDGET_END, card))
    told = eventually(
        lambda: world.ephemerals(OUTSIDER)[1:] and world.ephemerals(OUTSIDER),
        between=bot.drain,
        what="both refusals",
    )
    assert told == ["Not recorded: you are not allowed to decide this approval."] * 2
    assert [v for v in world.workspace.views() if v.user == OUTSIDER] == []
    assert bot.services.runtime.get(run_id).status == RunStatus.WAITING

    modal = open_raise(world, bot, APPROVER, asked)
    proposed = asked.args["raise_to"]["cost_usd"] - BUDGET_USD
    assert float(modal["blocks"][1]["element"]["initial_value"]) == round(proposed, 6)
    errors = acked(bot.post(submission(world, APPROVER, modal, "lots"))).json()
    assert errors == {
        "response_action": "errors",
        "errors": {"amount": "Type a number, like 0.05."},
    }
    confirm = acked(bot.post(submission(world, APPROVER, modal, "0.05"))).json()["view"]
    assert "from $0.0015 to *$0.0515*" in json.dumps(confirm["blocks"])
    assert acked(bot.post(submission(world, APPROVER, confirm))).body == ""
    raised = bot.decision(asked.id)
    assert raised.status == ApprovalStatus.APPROVED
    assert raised.decided_args is not None
    assert raised.decided_args["raise_to"] == {"cost_usd": 0.0515}

    bot.work()
    bot.drain()
    assert buttons(world.card(asked.id)) == []
    assert "Raised cost (USD) to $0.0515" in block_texts(world.card(asked.id))
    approve_the_rest(world, bot, run_id)
    output = bot.services.runtime.get(run_id).output
    assert output["budget"]["cost_usd"] == 0.0515
    assert audit_actions(bot, asked.id) == [
        ("requested", REQUESTER),
        ("unauthorized", OUTSIDER),
        ("unauthorized", OUTSIDER),
        ("edit", APPROVER),
    ]
    env = signoff_env(world.database_url)
    assert json.loads(cli_ok(env, "audit", "verify", "--json"))["ok"] is True


def test_end_the_run_cancels_it_with_its_approval_closed(
    world: SlackWorld, bot: BotInstance
) -> None:
    """An approver's End the run cancels the run and closes its budget approval."""
    run_id, asked = start_exhausting_run(world, bot)
    acked(bot.click(APPROVER, BUDGET_END, world.card(asked.id)))
    closed = bot.decision(asked.id)
    assert closed.status == ApprovalStatus.CANCELLED
    assert closed.decided_by is not None
    assert closed.decided_by.user_id == APPROVER
    assert bot.services.runtime.get(run_id).status == RunStatus.CANCELLED
    bot.drain()
    assert buttons(world.card(asked.id)) == []
    assert "🛑 *Cancelled*" in world.reply_texts(run_id)
    assert bot.work() == 0, "nothing of the run runs again"


def test_two_simultaneous_raises_on_two_instances_raise_once(pg_world: SlackWorld) -> None:
    """Two approvers submit different raises at once on two instances: one is recorded,
    the other is told who decided; the run resumes once, with the winner's limit."""
    world = pg_world
    first, second = world.instance(), world.instance(migrate=False)
    run_id, asked = start_exhausting_run(world, first)
    dana = confirm_view(world, first, APPROVER, asked, "0.05")
    erin = confirm_view(world, second, SECOND_APPROVER, asked, "0.07")
    answers = race(
        (first, submission(world, APPROVER, dana)),
        (second, submission(world, SECOND_APPROVER, erin)),
    )
    raised = first.decision(asked.id)
    assert raised.status == ApprovalStatus.APPROVED
    assert raised.decided_by is not None
    winner = raised.decided_by.user_id
    limit = {APPROVER: 0.0515, SECOND_APPROVER: 0.0715}[winner]
    assert raised.decided_args is not None
    assert raised.decided_args["raise_to"] == {"cost_usd": limit}
    won, lost = answers if winner == APPROVER else answers[::-1]
    assert acked(won).body == ""
    assert "already approved by" in json.dumps(acked(lost).json()["view"])
    decisions = [a for a, _ in audit_actions(first, asked.id) if a in ("edit", "late")]
    assert sorted(decisions) == ["edit", "late"]

    first.work()
    second.work()
    journal = first.services.runtime.journal(run_id)
    assert sum(1 for s in journal if s.name == "budget.exhausted") == 1
    assert first.services.runtime.get(run_id).status == RunStatus.WAITING, "the refund's card"
    env = signoff_env(world.database_url)
    assert json.loads(cli_ok(env, "audit", "verify", "--json"))["ok"] is True


def test_a_raise_and_an_end_racing_on_two_instances_one_wins(pg_world: SlackWorld) -> None:
    """Dana's raise on one instance and Erin's End the run on another, at once: exactly one
    takes effect, the other is told who decided, and the audit chain and the run agree."""
    world = pg_world
    first, second = world.instance(), world.instance(migrate=False)
    run_id, asked = start_exhausting_run(world, first)
    dana = confirm_view(world, first, APPROVER, asked, "0.05")
    end, _ = second.click_body(SECOND_APPROVER, BUDGET_END, world.card(asked.id))
    raised, clicked = race((first, submission(world, APPROVER, dana)), (second, end))
    acked(clicked)
    decided = first.decision(asked.id)
    assert decided.decided_by is not None
    run = first.services.runtime.get(run_id)

    def decisions() -> list[tuple[str, str]]:
        return [a for a in audit_actions(first, asked.id) if a[0] in ("edit", "closed", "late")]

    if decided.status == ApprovalStatus.APPROVED:
        assert decided.decided_by.user_id == APPROVER
        assert acked(raised).body == ""
        [told] = world.new_ephemerals(SECOND_APPROVER, 0, drain=second)
        assert told.startswith("Not recorded: already approved by")
        assert decisions() == [("edit", APPROVER), ("late", SECOND_APPROVER)]
        assert run.status != RunStatus.CANCELLED
        first.work()
        second.work()
        assert first.services.runtime.get(run_id).status == RunStatus.WAITING, "the refund"
    else:
        assert (decided.status, decided.decided_by.user_id) == (
            ApprovalStatus.CANCELLED,
            SECOND_APPROVER,
        )
        assert "already cancelled by" in json.dumps(acked(raised).json()["view"])
        assert decisions() == [("closed", SECOND_APPROVER), ("late", APPROVER)]
        assert run.status == RunStatus.CANCELLED
    env = signoff_env(world.database_url)
    assert json.loads(cli_ok(env, "audit", "verify", "--json"))["ok"] is True


def test_a_raise_confirmed_after_the_run_was_ended_is_told_who_ended_it(
    pg_world: SlackWorld,
) -> None:
    """Dana's raise, confirmed once Erin has ended the run, changes nothing and says so."""
    world = pg_world
    bot = world.instance()
    run_id, asked = start_exhausting_run(world, bot)
    dana = confirm_view(world, bot, APPROVER, asked, "0.05")
    acked(bot.click(SECOND_APPROVER, BUDGET_END, world.card(asked.id)))
    assert bot.decision(asked.id).status == ApprovalStatus.CANCELLED
    answer = acked(bot.post(submission(world, APPROVER, dana))).json()
    assert "already cancelled by" in json.dumps(answer["view"])
    assert bot.services.runtime.get(run_id).status == RunStatus.CANCELLED
    decisions = [a for a in audit_actions(bot, asked.id) if a[0] in ("edit", "closed", "late")]
    assert decisions == [("closed", SECOND_APPROVER), ("late", APPROVER)]
