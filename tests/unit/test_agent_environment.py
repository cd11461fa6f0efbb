"""The test environment agent authors use: scripted model, approvals by name, tool calls."""

from __future__ import annotations

from datetime import timedelta

from agent_runtime import Agent, ApprovalPolicy, RetryPolicy, RunStatus, Tools, tool
from agent_runtime.models import ScriptedModel, ToolCall, text_reply, tool_reply
from agent_runtime.testing import AgentEnvironment, ToolCallRecord

FLAKY_RETRY = RetryPolicy(max_attempts=2, initial_interval=timedelta(minutes=1))
failures = {"left": 0}


def lookup(order_id: str) -> dict[str, int]:
    """Look an order up."""
    if failures["left"]:
        failures["left"] -= 1
        raise ConnectionError("provider down")
    return {"amount_cents": 4999}


def refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return f"refunded {amount_cents}"


AGENT = Agent(
    name="refunds",
    model=ScriptedModel([]),
    system_prompt="refund carefully",
    tools=Tools(
        tool(retry=FLAKY_RETRY)(lookup),
        tool(side_effect=True, approval=ApprovalPolicy(approvers=("U_DANA",)))(refund),
    ),
)
LOOK = tool_reply(ToolCall(id="c1", name="lookup", arguments={"order_id": "7"}))
REFUND = tool_reply(
    ToolCall(id="c2", name="refund", arguments={"order_id": "7", "amount_cents": 4999})
)


def test_an_edited_approval_runs_the_tool_with_the_edited_arguments() -> None:
    """A run waits for its approval; an edit by an approver runs the tool with the edit."""
    env = AgentEnvironment(AGENT, [REFUND, text_reply("refunded half")])
    run_id = env.start("refund order 7")
    assert env.run_until_waiting(run_id).status == RunStatus.WAITING
    (approval,) = env.pending(run_id)
    assert not env.approve(approval, as_user="U_EVE").accepted
    assert env.edit(approval, {"order_id": "7", "amount_cents": 2000}, as_user="U_DANA").accepted
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert env.tool_calls == [
        ToolCallRecord("refund", {"order_id": "7", "amount_cents": 2000}, "refunded 2000")
    ]
    assert env.answer(run_id) == "refunded half"
    assert [s.name for s in env.journal(run_id)].count("model") == 2


def test_a_rejection_reaches_the_model_and_the_tool_never_runs() -> None:
    """A rejected call is not executed; the run still ends with the model's answer."""
    env = AgentEnvironment(AGENT, [REFUND, text_reply("not refunded")])
    run_id = env.start("refund order 7")
    env.run_until_waiting(run_id)
    assert env.reject(env.pending(run_id)[0], as_user="U_DANA", reason="no").accepted
    env.run_until_waiting(run_id)
    assert env.tool_calls == []
    assert env.answer(run_id) == "not refunded"


def test_a_retry_back_off_is_skipped_by_moving_the_clock() -> None:
    """A read-only tool retried a minute later completes at once: the frozen clock moved."""
    failures["left"] = 1
    env = AgentEnvironment(AGENT, [LOOK, text_reply("4999")])
    started = env.clock.now()
    run_id = env.start("how much was order 7?")
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert [c.error for c in env.tool_calls] == ["ConnectionError: provider down", None]
    assert env.clock.now() - started >= FLAKY_RETRY.initial_interval
