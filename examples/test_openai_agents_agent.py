"""The OpenAI Agents SDK example, its model scripted, against the approvals API and the real
Bolt app on SQLite: the refund waits for a click on its Slack card."""

import json
from pathlib import Path

from agents.testing import ScriptedModel

from agent_runtime import ApprovalStatus
from examples.openai_agents_agent import ask, refund_tool, scripted_model, support_agent
from examples.payments import Payments
from tests.integration.api_in_slack import SlackSignoff, slack_signoff
from tests.integration.api_server import Waiting


def _tool_output(model: ScriptedModel) -> str:
    """Return what the tool answered, as the model was given it."""
    last = model.last_call
    assert last is not None
    assert isinstance(last.input, list)
    [output] = [item for item in last.input if item.get("type") == "function_call_output"]
    return str(output["output"])


def _agent(signoff: SlackSignoff, payments: Payments, model: ScriptedModel) -> Waiting:
    """Start the agent on the refund task on its own thread."""
    tool = refund_tool(
        signoff.client, payments, approvers=[signoff.approver], channel=signoff.channel
    )
    return Waiting(lambda: ask(support_agent(model, [tool]), "refund order 1042"))


def test_the_refund_runs_once_approved_in_slack(tmp_path: Path) -> None:
    """The agent's refund waits for its card; once the approver clicks Approve the tool
    runs once, with exactly the approved arguments, and the model sees the receipt."""
    payments, model = Payments(), scripted_model("1042", 4999)
    with slack_signoff(tmp_path) as signoff:
        waiting = _agent(signoff, payments, model)
        approval = signoff.pending()
        assert payments.refunds == []
        decided = signoff.approve(approval)
        assert decided.status == ApprovalStatus.APPROVED
        assert waiting.result() == "I have dealt with the refund."
    assert decided.decided_args == {"order_id": "1042", "amount_cents": 4999}
    assert payments.refunds == [{"refunded": "1042", "amount_cents": 4999}]
    assert json.loads(_tool_output(model)) == payments.refunds[0]
    model.assert_complete()


def test_a_refund_rejected_in_slack_never_runs(tmp_path: Path) -> None:
    """Rejected from its card, the refund never runs; the model gets the reason instead."""
    payments, model = Payments(), scripted_model("1042", 4999)
    with slack_signoff(tmp_path) as signoff:
        waiting = _agent(signoff, payments, model)
        signoff.reject(signoff.pending(), "already refunded by hand")
        assert waiting.result() == "I have dealt with the refund."
    assert payments.refunds == []
    assert _tool_output(model).startswith("not refunded:")
    assert "already refunded by hand" in _tool_output(model)
