"""An OpenAI Agents SDK agent whose refund tool waits for a person's sign-off in Slack.

The tool asks Signoff with ``require_approval`` and refunds only once a person approved,
with exactly the arguments they approved (edited ones included); a rejection goes back to
the model as the tool's result, with the reason. The model's tool call id is the request's
idempotency key, so asking again for the same call (the agent retried, say) finds the same
approval rather than a second one.

The model here is the SDK's scripted one, so that the example runs offline; in real use,
give ``support_agent`` a model name such as ``"gpt-4.1"``. Run ``signoff serve``, create a
key with ``signoff api-key create --name support``, then ``python -m
examples.openai_agents_agent --url http://localhost:8080 --key sk_signoff_...
--approver U0DANA --channel C0SUPPORT``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from agents import Agent, FunctionTool, Model, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

from bot.client import NotApproved, SignoffClient
from examples.payments import Payments


def refund_tool(
    client: SignoffClient, payments: Payments, *, approvers: list[str], channel: str | None = None
) -> FunctionTool:
    """The ``issue_refund`` tool: it refunds only what a person approved in Slack."""

    @function_tool
    def issue_refund(ctx: ToolContext[Any], order_id: str, amount_cents: int) -> str:
        """Refund ``amount_cents`` of the order ``order_id`` (a person signs it off first).

        Args:
            order_id: The order to refund.
            amount_cents: How much to refund, in cents.
        """
        try:
            approved = client.require_approval(
                "issue_refund",
                {"order_id": order_id, "amount_cents": amount_cents},
                policy={"approvers": approvers, "deadline_seconds": 1800},
                idempotency_key=f"refund:{ctx.tool_call_id}",
                channel=channel,
                timeout=3600,
            )
        except NotApproved as exc:
            return f"not refunded: {exc}"
        return json.dumps(payments.refund(**approved.arguments))

    return issue_refund


def support_agent(model: Model | str, tools: list[FunctionTool]) -> Agent[Any]:
    """The agent: a support assistant that may refund orders."""
    return Agent(
        name="support",
        instructions="You help customers; refund an order when they are owed one.",
        model=model,
        tools=list(tools),
    )


def scripted_model(order_id: str, amount_cents: int) -> ScriptedModel:
    """A model that asks for the refund, then answers (standing in for a real one)."""
    arguments = {"order_id": order_id, "amount_cents": amount_cents}
    return ScriptedModel(
        [
            [function_call("issue_refund", arguments, call_id="call-refund")],
            [assistant_message("I have dealt with the refund.")],
        ]
    )


def ask(agent: Agent[Any], task: str) -> str:
    """Run the agent on ``task`` (sending no traces anywhere); return its final answer."""
    result = Runner.run_sync(agent, task, run_config=RunConfig(tracing_disabled=True))
    return str(result.final_output)


def main(argv: list[str] | None = None) -> int:
    """Ask the agent to refund order 1042 and print its answer."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="where signoff serve listens")
    parser.add_argument("--key", required=True, help="the key signoff api-key create showed")
    parser.add_argument("--approver", action="append", required=True, help="a Slack user id")
    parser.add_argument("--channel", help="the Slack channel of the card")
    args = parser.parse_args(argv)
    client, payments = SignoffClient(args.url, args.key), Payments()
    tools = [refund_tool(client, payments, approvers=args.approver, channel=args.channel)]
    print(ask(support_agent(scripted_model("1042", 4999), tools), "refund order 1042"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
