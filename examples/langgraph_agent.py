"""A LangGraph agent whose refund tool waits for a person's sign-off in Slack.

The graph is LangGraph's usual loop (model, then tools, then model) and knows nothing of
Signoff: only the tool does. Its side effect sits behind ``@approval_required``, so it runs
once a person approved, with exactly the arguments they approved (edited ones included);
a rejection goes back to the model as the tool's result, with the reason.

The model here is scripted, so that the example runs offline; in real use, give
``support_graph`` a tool-calling chat model, e.g. ``ChatOpenAI(...).bind_tools(tools)``.
Run ``signoff serve``, create a key with ``signoff api-key create --name support``, then
``python -m examples.langgraph_agent --url http://localhost:8080 --key sk_signoff_...
--approver U0DANA --channel C0SUPPORT``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from bot.client import NotApproved, SignoffClient, approval_required
from examples.payments import Payments


def refund_tool(
    client: SignoffClient, payments: Payments, *, approvers: list[str], channel: str | None = None
) -> BaseTool:
    """The ``issue_refund`` tool: it refunds only what a person approved in Slack."""

    @approval_required(
        client,
        tool="issue_refund",
        policy={"approvers": approvers, "deadline_seconds": 1800},
        channel=channel,
        timeout=3600,
    )
    def refund(order_id: str, amount_cents: int) -> dict[str, Any]:
        return payments.refund(order_id, amount_cents)

    @tool
    def issue_refund(order_id: str, amount_cents: int) -> str:
        """Refund ``amount_cents`` of the order ``order_id`` (a person signs it off first)."""
        try:
            return json.dumps(refund(order_id, amount_cents))
        except NotApproved as exc:
            return f"not refunded: {exc}"

    return issue_refund


def support_graph(
    model: Runnable[LanguageModelInput, AIMessage], tools: list[BaseTool]
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The agent: the model answers or calls tools, whose results go back to the model."""

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def scripted_model(order_id: str, amount_cents: int) -> GenericFakeChatModel:
    """A model that asks for the refund, then answers (standing in for a real one)."""
    call = {"name": "issue_refund", "args": {"order_id": order_id, "amount_cents": amount_cents}}
    return GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(content="", tool_calls=[{**call, "id": "call-refund"}]),
                AIMessage(content="I have dealt with the refund."),
            ]
        )
    )


def ask(graph: CompiledStateGraph[Any, Any, Any, Any], task: str) -> list[BaseMessage]:
    """Run the graph on ``task``; return the conversation it ends with."""
    state = graph.invoke({"messages": [HumanMessage(content=task)]})
    return list(state["messages"])


def main(argv: list[str] | None = None) -> int:
    """Ask the agent to refund order 1042 and print what came of it."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="where signoff serve listens")
    parser.add_argument("--key", required=True, help="the key signoff api-key create showed")
    parser.add_argument("--approver", action="append", required=True, help="a Slack user id")
    parser.add_argument("--channel", help="the Slack channel of the card")
    args = parser.parse_args(argv)
    client, payments = SignoffClient(args.url, args.key), Payments()
    tools = [refund_tool(client, payments, approvers=args.approver, channel=args.channel)]
    for message in ask(support_graph(scripted_model("1042", 4999), tools), "refund order 1042"):
        print(f"{message.type}: {message.content}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
