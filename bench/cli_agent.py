"""The agent ``bench.cli_start`` configures (``SIGNOFF_AGENT=bench.cli_agent:agent``): one
gated tool, a scripted model, nothing imported beyond the runtime, so that what the benchmark
times is Signoff's own start-up."""

from __future__ import annotations

from datetime import timedelta

from agent_runtime import Agent, ApprovalPolicy, Tools, tool
from agent_runtime.models.scripted import ScriptedModel, text_reply

APPROVER = "U_BENCH"


@tool(side_effect=True, approval=ApprovalPolicy(approvers=(APPROVER,), deadline=timedelta(days=1)))
def refund(order_id: str, amount_cents: int) -> str:
    """Refund an order (never called: the benchmark only decides its approvals).

    Args:
        order_id: The order.
        amount_cents: How much.
    """
    return f"{order_id}:{amount_cents}"


agent = Agent(
    name="bench",
    model=ScriptedModel([text_reply("done")]),
    system_prompt="Refund orders.",
    tools=Tools(refund),
)
