"""An exhausted budget asks for a raise as an approval, on the in-memory fakes.

The approval lists each model call's spend as the journal recorded it, a projection and a
proposed raise; ``decide_budget`` (the one path of Slack and the command line) raises it
through the approvals' quorum, compare-and-set and audit, or ends the run with its approval
closed; a run that asked before raises were approvals is still raised as then.
"""

from __future__ import annotations

import dataclasses

import pytest

from agent_runtime import (
    Actor,
    Agent,
    ApprovalPolicy,
    ApprovalStatus,
    Budget,
    Decision,
    InvalidInput,
    RunId,
    RunStatus,
    Tools,
    tool,
)
from agent_runtime.approvals import ApprovalKind
from agent_runtime.audit_report import examine
from agent_runtime.budget import Consumption
from agent_runtime.budget_ask import projection, round_up, suggested_limit
from agent_runtime.budget_control import BudgetOutcome, decide_budget
from agent_runtime.deployment import Deployment
from agent_runtime.models import ScriptedModel, text_reply
from agent_runtime.records import StepKind
from agent_runtime.testing import AgentEnvironment
from tests.unit.agent_harness import DANA, EVE, LOOKUP, OMAR, REQUESTER, AgentHarness

LOOKUPS = [LOOKUP, LOOKUP, LOOKUP, text_reply("done")]
"""Three lookups then an answer: four model calls."""


def exhausted(calls: int = 2) -> tuple[AgentHarness, RunId]:
    """A run whose budget of ``calls`` model calls runs out before its answer."""
    h = AgentHarness(LOOKUPS, budget=Budget(model_calls=calls))
    run_id = h.start()
    h.work()
    return h, run_id


def lookup_agent(**changes: object) -> Agent:
    """An agent whose one tool needs no approval (so only ``changes`` name approvers)."""

    def lookup_order(order_id: str) -> dict[str, str]:
        """Look an order up."""
        return {"id": order_id}

    agent = Agent(
        name="t",
        model=ScriptedModel(LOOKUPS, name="scripted"),
        system_prompt="be careful",
        tools=Tools(tool(lookup_order)),
        budget=Budget(model_calls=1),
    )
    return dataclasses.replace(agent, **changes)  # type: ignore[arg-type]


def test_exhaustion_asks_for_a_raise_listing_each_model_call_from_the_journal() -> None:
    """The run waits for a budget approval whose calls are the journal's model steps."""
    h, run_id = exhausted()
    [asked] = h.env.pending(run_id)
    assert (asked.kind, asked.tool) == (ApprovalKind.BUDGET, "budget:t")
    assert h.run(run_id).wait_key == f"approval:{asked.id}"
    journal = h.store.load_journal(run_id)
    models = [s for s in journal if s.kind == StepKind.STEP and s.name == "model"]
    assert [c["position"] for c in asked.args["calls"]] == [s.position for s in models]
    assert [c["input_tokens"] for c in asked.args["calls"]] == [
        s.output["usage"]["input_tokens"] for s in models
    ]
    assert asked.args["limit"] == "model_calls"
    assert asked.args["left"]["model_calls"] == 0
    assert asked.args["projection"]["more_calls"] == 2
    assert asked.args["raise_to"] == {"model_calls": 4}
    assert asked.policy.approvers == ("U_DANA", "U_OMAR")
    assert h.model.calls == 2


def test_a_raise_resumes_the_run_with_the_raised_limit_and_is_audited() -> None:
    """An approver's raise is an edit decision in the audit chain; the run then finishes."""
    h, run_id = exhausted()
    [asked] = h.env.pending(run_id)
    outcome = decide_budget(h.runtime, h.agent, run_id, DANA, limits=Budget(model_calls=5))
    assert outcome.accepted, outcome.message
    h.work()
    run = h.run(run_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output["budget"]["model_calls"] == 5
    assert h.model.calls == 4
    entries, heads = h.approval_store.audit_log()
    assert examine(entries, heads).problems == []
    [raise_entry] = [e for e in entries if e.approval_id == asked.id and e.action == "edit"]
    assert raise_entry.actor is not None
    assert raise_entry.actor["user_id"] == DANA.user_id
    assert raise_entry.detail is not None
    assert raise_entry.detail["args"]["raise_to"] == {"model_calls": 5}
    assert raise_entry.detail["status"] == "approved"


def test_an_outsider_can_neither_raise_nor_end_and_each_attempt_is_audited() -> None:
    """Someone not among the approvers changes nothing; both attempts are in the log."""
    h, run_id = exhausted()
    [asked] = h.env.pending(run_id)
    raised = decide_budget(h.runtime, h.agent, run_id, EVE, limits=Budget(model_calls=5))
    ended = decide_budget(h.runtime, h.agent, run_id, EVE, end=True)
    assert (raised.accepted, ended.accepted) == (False, False)
    assert h.env.pending(run_id) == [asked]
    assert h.run(run_id).status == RunStatus.WAITING
    entries, _ = h.approval_store.audit_log()
    refused = [e.action for e in entries if e.approval_id == asked.id and e.actor == EVE.to_json()]
    assert refused == ["unauthorized", "unauthorized"]


def test_ending_cancels_the_run_with_its_approval_closed() -> None:
    """End the run: cancelled, and its budget approval closed by the person who ended it."""
    h, run_id = exhausted()
    [asked] = h.env.pending(run_id)
    outcome = decide_budget(h.runtime, h.agent, run_id, DANA, end=True)
    assert outcome.accepted
    assert h.run(run_id).status == RunStatus.CANCELLED
    closed = h.approvals.get(asked.id)
    assert closed.status == ApprovalStatus.CANCELLED
    assert closed.decided_by == DANA
    assert h.model.calls == 2


def test_an_end_loses_to_a_raise_landing_after_its_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A raise decided between End's check and its cancel wins: the run goes on, the
    approval stays raised, and the person ending is told who raised it (and audited)."""
    h, run_id = exhausted()
    [asked] = h.env.pending(run_id)
    checked = h.approvals.refuse

    def check_then_raise(approval: str, actor: Actor, decision: Decision) -> object:
        verdict = checked(approval, actor, decision)
        if verdict is None:  # Omar's raise lands before Dana's cancel
            decide_budget(h.runtime, h.agent, run_id, OMAR, limits=Budget(model_calls=5))
        return verdict

    monkeypatch.setattr(h.approvals, "refuse", check_then_raise)
    ended = decide_budget(h.runtime, h.agent, run_id, DANA, end=True)
    monkeypatch.undo()
    assert not ended.accepted
    assert ended.message.startswith("already approved by omar")
    raised = h.approvals.get(asked.id)
    assert (raised.status, raised.decided_by) == (ApprovalStatus.APPROVED, OMAR)
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    entries, heads = h.approval_store.audit_log()
    assert examine(entries, heads).problems == []
    actions = [(e.action, (e.actor or {}).get("user_id")) for e in entries]
    assert [a for a in actions if a[0] in ("edit", "late", "closed")] == [
        ("edit", "U_OMAR"),
        ("late", "U_DANA"),
    ]


def test_ending_or_raising_a_card_decided_since_says_who_decided_it() -> None:
    """Clicking End or raising on a card another person has decided since tells who decided
    what, and the attempt is audited as late; the run is left as the decision made it."""
    h, run_id = exhausted()
    [asked] = h.env.pending(run_id)
    assert decide_budget(h.runtime, h.agent, run_id, OMAR, limits=Budget(model_calls=5)).accepted
    ended = decide_budget(h.runtime, h.agent, run_id, DANA, end=True, approval_id=asked.id)
    raised = decide_budget(
        h.runtime, h.agent, run_id, DANA, limits=Budget(model_calls=9), approval_id=asked.id
    )
    assert [o.accepted for o in (ended, raised)] == [False, False]
    assert ended.message.startswith("already approved by omar")
    assert raised.message.startswith("already approved by omar")
    assert h.run(run_id).status != RunStatus.CANCELLED
    entries, _ = h.approval_store.audit_log()
    late = [e.action for e in entries if e.actor == DANA.to_json()]
    assert late == ["late", "late"]


def test_a_raise_must_be_above_the_limit_and_for_the_approval_shown() -> None:
    """A raise to the current limit or below is refused; so is one for an older approval."""
    h, run_id = exhausted()
    with pytest.raises(InvalidInput, match="above its current limit 2"):
        decide_budget(h.runtime, h.agent, run_id, DANA, limits=Budget(model_calls=2))
    with pytest.raises(InvalidInput, match="at most 1000 times"):
        decide_budget(h.runtime, h.agent, run_id, DANA, limits=Budget(model_calls=2001))
    [asked] = h.env.pending(run_id)
    other = "b" * 24
    with pytest.raises(Exception, match="its budget is not exhausted"):
        decide_budget(
            h.runtime, h.agent, run_id, DANA, limits=Budget(model_calls=3), approval_id=other
        )
    assert h.env.pending(run_id) == [asked]


def test_a_raise_that_leaves_the_exhausted_limit_as_it_was_is_refused() -> None:
    """Raising the cost of a run stopped at its model calls was approved, and the run
    stopped again at once: it is refused naming the limit, and nothing is decided."""
    h, run_id = exhausted()
    with pytest.raises(InvalidInput, match="stopped at its model_calls limit: raise that one"):
        decide_budget(h.runtime, h.agent, run_id, DANA, limits=Budget(tokens=10_000))
    [asked] = h.env.pending(run_id)
    assert asked.status == ApprovalStatus.PENDING
    both = Budget(model_calls=4, tokens=10_000)
    assert decide_budget(h.runtime, h.agent, run_id, DANA, limits=both).accepted


def test_a_quorum_raises_only_once_enough_approvers_agree_on_the_same_limits() -> None:
    """With two required, votes on different limits start over; two on the same raise."""
    policy = ApprovalPolicy(approvers=("U_DANA", "U_OMAR"), required=2)
    env = AgentEnvironment(lookup_agent(budget_policy=policy))
    run_id = env.start("look 1042 up")
    env.run_until_waiting(run_id)

    def decide(who: Actor, calls: int) -> BudgetOutcome:
        return decide_budget(env.runtime, env.agent, run_id, who, limits=Budget(model_calls=calls))

    assert decide(DANA, 3).accepted
    assert decide(OMAR, 4).accepted, "a vote on other limits starts the count again"
    assert env.runtime.get(run_id).status == RunStatus.WAITING
    assert decide(DANA, 4).accepted
    [approval] = env.approval_store.list_approvals(run_id=run_id)
    assert approval.status == ApprovalStatus.APPROVED
    assert approval.decided_args is not None
    assert approval.decided_args["raise_to"] == {"model_calls": 4}
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED


def test_a_run_that_asked_before_raises_were_approvals_is_raised_as_then() -> None:
    """A journal that waits under ``budget:1`` replays that wait and takes the old raise."""
    env = AgentEnvironment(lookup_agent())
    run_id = env.start("look 1042 up")
    assert env.run_until_waiting(run_id).wait_key == "budget:1", "nobody may raise: no approval"
    now = lookup_agent(budget_approvers=("U_DANA",))
    upgraded = Deployment(env.store, env.approval_store, [now], clock=env.clock)
    raised = decide_budget(upgraded.runtime, now, run_id, DANA, limits=Budget(model_calls=9))
    assert (raised.accepted, raised.message) == (True, "raised")
    upgraded.runtime.worker().run_once()
    run = upgraded.runtime.get(run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert env.approval_store.list_approvals(run_id=run_id) == []


def test_the_projection_assumes_as_many_calls_again_at_the_average_cost() -> None:
    """Average cost per call times the calls made so far (at most the turns left)."""
    used = Consumption(input_tokens=900, output_tokens=300, cost_usd=0.0036, model_calls=3)
    ahead = projection(used, turns_left=2)
    assert ahead["cost_usd_per_call"] == 0.0012
    assert ahead["more_calls"] == 2
    assert ahead["cost_usd"] == 0.0024
    assert ahead["tokens"] == 800
    budget = Budget(cost_usd=0.004)
    assert suggested_limit("cost_usd", budget, used, ahead) == 0.006
    assert round_up(0.00123) == 0.0013
    assert round_up(1234) == 1300


def test_an_expired_raise_ends_the_run_fail_closed() -> None:
    """Nobody deciding by the deadline ends the run as a refused raise would."""
    h, run_id = exhausted()
    [asked] = h.env.pending(run_id)
    h.clock.advance(asked.deadline - h.clock.now())
    assert h.approvals.sweep().expired
    h.work()
    run = h.run(run_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output["ended"] == "budget"
    assert run.output["ended_by"] == {
        "status": "expired",
        "by": None,
        "at": asked.deadline.isoformat(),
        "reason": "no decision before the deadline",
    }
    assert h.model.calls == 2


def test_a_declined_raise_ends_the_run_saying_who_declined_and_why() -> None:
    """A rejected raise ends the run; its result names who rejected it and the reason."""
    h, run_id = exhausted()
    [asked] = h.env.pending(run_id)
    assert h.approvals.decide(asked.id, OMAR, Decision.REJECT, reason="too dear").accepted
    h.work()
    run = h.run(run_id)
    assert (run.status, run.output["ended"]) == (RunStatus.COMPLETED, "budget")
    assert run.output["ended_by"]["status"] == "rejected"
    assert run.output["ended_by"]["by"]["user_id"] == OMAR.user_id
    assert run.output["ended_by"]["reason"] == "too dear"


def test_a_raise_is_decided_by_the_approvals_service_like_any_approval() -> None:
    """Approving the proposed raise as it stands (``signoff approve``) raises it too."""
    h, run_id = exhausted()
    [asked] = h.env.pending(run_id)
    assert h.approvals.decide(asked.id, OMAR, Decision.APPROVE).accepted
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    assert h.run(run_id).output["budget"]["model_calls"] == 4
    assert REQUESTER.user_id not in asked.policy.approvers
