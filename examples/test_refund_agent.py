"""Tests of the support agent, with its model scripted: no network, no database."""

from agent_runtime.models import ToolCall, text_reply, tool_reply
from agent_runtime.testing import AgentEnvironment
from examples.refund_agent import support

LOOK_UP = tool_reply(ToolCall(id="c1", name="lookup_order", arguments={"order_id": "1042"}))
REFUND = tool_reply(
    ToolCall(id="c2", name="issue_refund", arguments={"order_id": "1042", "amount_cents": 4999})
)


def test_a_refund_runs_once_a_finance_approver_agrees() -> None:
    """The refund waits for finance; an outsider's approval does not count, Dana's does."""
    env = AgentEnvironment(support, script=[LOOK_UP, REFUND, text_reply("Refunded 49.99.")])
    run_id = env.start("refund order 1042")
    env.run_until_waiting(run_id)
    (approval,) = env.pending(run_id)
    assert approval.args == {"order_id": "1042", "amount_cents": 4999}
    assert not env.approve(approval, as_user="U_EVE").accepted
    assert env.approve(approval, as_user="U_DANA").accepted
    env.run_until_waiting(run_id)
    assert [call.tool for call in env.tool_calls] == ["lookup_order", "issue_refund"]
    assert env.answer(run_id) == "Refunded 49.99."


def test_a_rejected_refund_is_never_issued() -> None:
    """A rejection goes back to the model with its reason; the refund tool never runs."""
    env = AgentEnvironment(support, script=[REFUND, text_reply("I could not refund it.")])
    run_id = env.start("refund order 1042")
    env.run_until_waiting(run_id)
    env.reject(env.pending(run_id)[0], as_user="U_OMAR", reason="already refunded by hand")
    env.run_until_waiting(run_id)
    assert env.tool_calls == []
    assert env.answer(run_id) == "I could not refund it."
