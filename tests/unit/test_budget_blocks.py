"""The budget card and its modals pass slack_sdk's Block Kit models, in every state.

The approval is a real one, asked by a run on the in-memory fakes; the model name in its
spend table is made hostile (mentions, markup, hidden characters), as a provider could
return anything there.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk.models.blocks import Block as SdkBlock
from slack_sdk.models.views import View

from agent_runtime import Approval, ApprovalStatus, Budget, Run, RunId, RunStatus
from agent_runtime.approvals import ApprovalId, args_hash
from bot.slack.blocks import approval_ref
from bot.slack.budget_blocks import (
    BUDGET_END,
    BUDGET_RAISE,
    amount_modal,
    budget_card,
    confirm_modal,
    outcome_modal,
    parse_confirm,
    spend_table,
)
from bot.slack.home import APPROVALS_SHOWN, home_view
from bot.slack.run_status import status_line, thread_status
from bot.slack.text import TEXT_LIMIT
from tests.unit.agent_harness import LOOKUP, AgentHarness
from tests.unit.slack_fixtures import DANA, HIDDEN, hidden_in

HOSTILE_MODEL = "<!channel> *x* <@U_EVIL>" + HIDDEN


def asked() -> Approval:
    """A pending budget approval of a run that used its 2 model calls, its model renamed."""
    h = AgentHarness([LOOKUP, LOOKUP, LOOKUP], budget=Budget(model_calls=2, cost_usd=None))
    run_id = h.start()
    h.work()
    [found] = h.env.pending(run_id)
    calls = [c | {"model": HOSTILE_MODEL} for c in found.args["calls"]]
    args = found.args | {"calls": calls}
    return dataclasses.replace(found, args=args, args_hash=args_hash(args))


def states() -> Iterator[tuple[str, Approval]]:
    """The card's states: asked, one vote of two, raised, ended, expired."""
    pending = asked()
    raised = pending.args | {"raise_to": {"model_calls": 7}}
    vote = {**DANA.to_json(), "at": pending.requested_at.isoformat(), "args_hash": "x"}
    voted = dataclasses.replace(
        pending,
        decided_args=raised,
        decided_args_hash=args_hash(raised),
        approvals=(vote,),
        policy=dataclasses.replace(pending.policy, required=2),
    )
    at = pending.requested_at
    yield "pending", pending
    yield "one vote of two", voted
    yield (
        "raised",
        dataclasses.replace(voted, status=ApprovalStatus.APPROVED, decided_by=DANA, decided_at=at),
    )
    yield (
        "ended",
        dataclasses.replace(
            pending, status=ApprovalStatus.CANCELLED, decided_by=DANA, decided_at=at
        ),
    )
    yield "expired", dataclasses.replace(pending, status=ApprovalStatus.EXPIRED, decided_at=at)


STATES = list(states())


def check_blocks(body: list[dict[str, Any]], limit: int) -> None:
    """Each block passes slack_sdk's models, and there are no more than ``limit``."""
    for block in body:
        parsed = SdkBlock.parse(block)
        assert parsed is not None, block
        parsed.validate_json()
    assert len(body) <= limit


@pytest.mark.parametrize(("what", "approval"), STATES, ids=[s[0] for s in STATES])
def test_every_budget_card_passes_block_kit(what: str, approval: Approval) -> None:
    """The card passes Block Kit in each state; only a pending one has the two buttons."""
    text, body = budget_card(approval)
    assert len(text) <= TEXT_LIMIT
    check_blocks(body, 50)
    actions = [e["action_id"] for b in body if b["type"] == "actions" for e in b["elements"]]
    pending = approval.status == ApprovalStatus.PENDING
    assert actions == ([BUDGET_RAISE, BUDGET_END] if pending else [])


def test_every_budget_modal_passes_block_kit() -> None:
    """The amount, confirmation and outcome modals pass slack_sdk's View model."""
    pending = asked()
    ref = approval_ref(pending)
    views = [
        amount_modal(pending),
        confirm_modal(pending, {"model_calls": 6}, ref),
        outcome_modal("Not recorded: <@U_X> &amp;"),
    ]
    for view in views:
        View(**view).validate_json()
        check_blocks(view["blocks"], 100)
    assert parse_confirm(views[1]["private_metadata"]) == (ref, {"model_calls": 6})
    typed = views[0]["blocks"][1]["element"]["initial_value"]
    assert typed == "2", "the proposed raise: 2 more calls"


def test_the_spend_table_lists_each_call_and_the_totals() -> None:
    """One row per model call, with its tokens and cost, then the totals."""
    pending = asked()
    rows = spend_table(pending.args).splitlines()
    assert rows[0].split() == ["step", "model", "tokens", "in", "tokens", "out", "cost", "USD"]
    assert len(rows) == 1 + len(pending.args["calls"]) + 1
    assert rows[-1].split()[:3] == ["all", "2", "calls"]


def test_no_budget_payload_shows_hostile_markup_or_hidden_characters() -> None:
    """The model name's mentions and hidden characters never reach Slack as markup."""
    pending = asked()
    payloads = [budget_card(a) for _, a in STATES]
    assert hidden_in([list(p) for p in payloads]) == []
    own = re.compile(r"^<(@U_[A-Z]+|!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>|]+)>$")
    mrkdwn = [
        b["text"]["text"]
        for _, body in payloads
        for b in body
        if b.get("text", {}).get("type") == "mrkdwn"
    ]
    found = {m for s in mrkdwn for m in re.findall(r"<[^<>]*>", s) if not own.match(m)}
    assert found == set()
    assert "<!channel>" in spend_table(pending.args), "shown literally, in preformatted text"


def test_the_home_tab_shows_budget_cards_with_their_buttons_within_block_kit() -> None:
    """A Home tab full of budget cards (one vote cast on each) still fits a view."""
    voted = dict(STATES)["one vote of two"]
    cards = [dataclasses.replace(voted, id=ApprovalId(f"{n:024x}")) for n in range(APPROVALS_SHOWN)]
    view = home_view(cards, 3, [], [])
    View(**view).validate_json()
    check_blocks(view["blocks"], 100)
    assert json.dumps(view).count(f'"action_id": "{BUDGET_RAISE}"') == APPROVALS_SHOWN


def test_the_thread_status_says_the_run_waits_for_a_raise() -> None:
    """A run waiting on its budget approval says so under its thread and on its root."""
    pending = asked()
    run = Run(
        id=RunId(pending.run_id),
        workflow="agent:t",
        status=RunStatus.WAITING,
        input={},
        created_at=pending.requested_at,
        updated_at=pending.requested_at,
        wait_key=f"approval:{pending.id}",
    )
    assert thread_status(run, [pending]) == (
        "is waiting for an approver to raise the budget or end the run"
    )
    assert "to raise the budget or end the run" in status_line(run, [pending])


def test_after_a_vote_the_card_shows_the_amount_voted_on_and_its_votes() -> None:
    """With quorum two, a vote for 7 calls replaces the first proposal (4) on the card."""
    voted = dict(STATES)["one vote of two"]
    assert voted.args["raise_to"] == {"model_calls": 4}
    shown = json.dumps(budget_card(voted)[1]) + json.dumps(amount_modal(voted)["blocks"])
    assert "Proposed: raise model calls to 4" not in shown
    assert "*Voting on*: raise model calls to 7, approved by <@U_DANA> (1 of 2)." in shown
    fresh = json.dumps(budget_card(asked())[1])
    assert "Proposed: raise model calls to 4." in fresh


def ended_run(output: dict[str, Any]) -> Run:
    """A run that its exhausted budget ended with ``output``."""
    at = dict(STATES)["pending"].requested_at
    return Run(
        id=RunId("r" * 24),
        workflow="agent:t",
        status=RunStatus.COMPLETED,
        input={},
        output={"answer": None, "ended": "budget"} | output,
        created_at=at,
        updated_at=at,
    )


def test_an_ended_budget_says_whether_the_raise_expired_or_who_declined_it() -> None:
    """Expired: when; rejected: who and why (escaped); nobody is said to have ended it."""
    at = "2026-03-01T12:30:00+00:00"
    expired = ended_run({"ended_by": {"status": "expired", "by": None, "at": at}})
    declined = ended_run(
        {
            "ended_by": {
                "status": "rejected",
                "by": DANA.to_json(),
                "at": at,
                "reason": "too dear <!channel>",
            }
        }
    )
    assert status_line(expired, []) == (
        "🛑 *Ended: the budget raise expired at "
        "<!date^1772368200^{date_short_pretty} {time}|12:30 UTC Mar 01>*"
    )
    assert status_line(declined, []) == (
        "🛑 *Ended: <@U_DANA> declined to raise the budget (too dear &lt;!channel&gt;)*"
    )
