"""The LangGraph example, its model scripted, against the approvals API and the real Bolt
app on SQLite: the refund waits for a click on its Slack card."""

from pathlib import Path

from langchain_core.messages import ToolMessage

from agent_runtime import ApprovalStatus
from examples.langgraph_agent import ask, refund_tool, scripted_model, support_graph
from examples.payments import Payments
from tests.integration.api_in_slack import SlackSignoff, slack_signoff
from tests.integration.api_server import Waiting


def _agent(signoff: SlackSignoff, payments: Payments) -> Waiting:
    """Start the graph on the refund task on its own thread."""
    tool = refund_tool(
        signoff.client, payments, approvers=[signoff.approver], channel=signoff.channel
    )
    graph = support_graph(scripted_model("1042", 4999), [tool])
    return Waiting(lambda: ask(graph, "refund order 1042"))


def test_the_refund_runs_once_as_edited_in_slack(tmp_path: Path) -> None:
    """The graph's refund waits for its card; the approver edits the amount in Slack; the
    tool runs once, with exactly the edited arguments, and the model sees the receipt."""
    payments = Payments()
    with slack_signoff(tmp_path) as signoff:
        waiting = _agent(signoff, payments)
        approval = signoff.pending()
        assert approval.args == {"order_id": "1042", "amount_cents": 4999}
        assert payments.refunds == []
        edited = {"order_id": "1042", "amount_cents": 2500}
        assert signoff.edit(approval, edited).status == ApprovalStatus.APPROVED
        messages = waiting.result()
    assert payments.refunds == [{"refunded": "1042", "amount_cents": 2500}]
    [result] = [m for m in messages if isinstance(m, ToolMessage)]
    assert '"amount_cents": 2500' in str(result.content)
    assert messages[-1].content == "I have dealt with the refund."


def test_a_refund_rejected_in_slack_never_runs(tmp_path: Path) -> None:
    """Rejected from its card, the refund never runs; the model gets the reason instead."""
    payments = Payments()
    with slack_signoff(tmp_path) as signoff:
        waiting = _agent(signoff, payments)
        signoff.reject(signoff.pending(), "already refunded by hand")
        messages = waiting.result()
    assert payments.refunds == []
    [result] = [m for m in messages if isinstance(m, ToolMessage)]
    assert str(result.content).startswith("not refunded:")
    assert "already refunded by hand" in str(result.content)
