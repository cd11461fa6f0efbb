"""A model turn's calls run as they are decided: an approved call does not wait for later ones."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from agent_runtime import (
    Actor,
    Agent,
    Agents,
    ApprovalPolicy,
    Decision,
    Deployment,
    RunId,
    RunStatus,
    Tools,
    WorkerOptions,
    tool,
)
from agent_runtime.agent import AgentInput
from agent_runtime.agent_loop import AgentLoop
from agent_runtime.deployment import tool_lookup
from agent_runtime.environment import REQUESTER
from agent_runtime.models import Message, ScriptedModel, ToolCall, text_reply, tool_reply
from agent_runtime.testing import (
    AgentEnvironment,
    FrozenClock,
    InMemoryApprovalStore,
    InMemoryStore,
)
from agent_runtime.workflows import Workflows

SIGN_OFF = ApprovalPolicy(approvers=("U_DANA",))


def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def send_email(to: str) -> str:
    """Email a customer."""
    return f"emailed {to}"


def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}"


AGENT = Agent(
    name="refunds",
    model=ScriptedModel([]),
    system_prompt="refund carefully",
    tools=Tools(
        tool(side_effect=True, approval=SIGN_OFF)(refund),
        tool(side_effect=True, approval=SIGN_OFF)(send_email),
        tool()(lookup),
    ),
)
TURN = tool_reply(
    ToolCall(id="c1", name="refund", arguments={"order_id": "7"}),
    ToolCall(id="c2", name="send_email", arguments={"to": "a@example.com"}),
)


def test_an_approved_call_runs_before_the_next_call_of_its_turn_is_decided() -> None:
    """Approving the refund runs it at once, while the email of the same turn still waits."""
    env = AgentEnvironment(AGENT, [TURN, text_reply("done")])
    run_id = env.start("refund order 7 and email the customer")
    env.run_until_waiting(run_id)
    refund_approval, email_approval = env.pending(run_id)
    assert env.approve(refund_approval, as_user="U_DANA").accepted
    assert env.run_until_waiting(run_id).status == RunStatus.WAITING
    assert [c.tool for c in env.tool_calls] == ["refund"]
    assert env.approve(email_approval, as_user="U_DANA").accepted
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert [c.tool for c in env.tool_calls] == ["refund", "send_email"]
    names = [s.name for s in env.journal(run_id)]
    assert (
        names.index("tool:refund")
        < names.index(f"approval:{email_approval.id}")
        < names.index("tool:send_email")
    ), "the journal records when each call ran"


def test_a_read_only_call_runs_without_waiting_for_a_sign_off_after_it() -> None:
    """A lookup proposed before a gated refund runs while the refund waits for its sign-off."""
    turn = tool_reply(
        ToolCall(id="c1", name="lookup", arguments={"order_id": "7"}),
        ToolCall(id="c2", name="refund", arguments={"order_id": "7"}),
    )
    env = AgentEnvironment(AGENT, [turn, text_reply("done")])
    run_id = env.start("look order 7 up and refund it")
    assert env.run_until_waiting(run_id).status == RunStatus.WAITING
    assert [c.tool for c in env.tool_calls] == ["lookup"]


class WaitsForAllFirst(AgentLoop):
    """The agent loop as it was: a turn waited for every decision before running any call."""

    def _tool_turn(self, calls: tuple[ToolCall, ...]) -> list[Message]:
        plans = [self._plan(call) for call in calls]
        decisions = [self._decision(plan) for plan in plans]
        return [
            self._answer(plan, decision) for plan, decision in zip(plans, decisions, strict=True)
        ]


def _drive(deployment: Deployment, run_id: RunId) -> RunStatus:
    worker = deployment.runtime.worker(WorkerOptions(owner="w", lease_ttl=timedelta(minutes=5)))
    while worker.run_once():
        pass
    return deployment.runtime.get(run_id).status


def test_a_run_journaled_waiting_for_every_decision_first_resumes_the_same_way() -> None:
    """A run left mid-turn by the former loop replays and completes under the new one."""
    store, clock = InMemoryStore(), FrozenClock()
    approvals = InMemoryApprovalStore(store)
    agent = replace(AGENT, model=ScriptedModel([TURN, text_reply("done")]))
    workflows = Workflows()
    old = Deployment(
        store, approvals, [], clock=clock, workflows=workflows, tools=tool_lookup(Agents(agent))
    )
    workflows.add(
        agent.workflow,
        lambda ctx, data: WaitsForAllFirst(
            agent, old.approvals, ctx, AgentInput.from_json(data)
        ).run(),
    )
    run_id = old.runtime.start(
        agent.workflow, AgentInput(task="t", requester=REQUESTER).to_json()
    ).id
    _drive(old, run_id)
    refund_approval, email_approval = reversed(approvals.list_approvals(run_id=run_id))
    old.approvals.decide(refund_approval.id, Actor(user_id="U_DANA"), Decision.APPROVE)
    assert _drive(old, run_id) == RunStatus.WAITING

    new = Deployment(
        store, approvals, [replace(agent, model=ScriptedModel([text_reply("done")]))], clock=clock
    )
    new.approvals.decide(email_approval.id, Actor(user_id="U_DANA"), Decision.APPROVE)
    assert _drive(new, run_id) == RunStatus.COMPLETED, new.runtime.get(run_id).error
