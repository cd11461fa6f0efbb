"""The demo agent's model: scripted rules, so the demo runs offline and the same every time.

It understands tasks like "refund order 1042 and email the customer": it looks the order
up, then proposes the refund and the email together (two approvals at once), then sums up.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_runtime.models.base import Message, ModelRequest, ModelResponse, ToolCall
from agent_runtime.models.scripted import ScriptedModel, text_reply, tool_reply

HELP = 'I can refund orders and email customers, e.g. "refund order 1042 and email the customer".'


def demo_model() -> ScriptedModel:
    """Return the demo's rule-based model."""
    return ScriptedModel(respond, name="demo-scripted")


def respond(request: ModelRequest) -> ModelResponse:
    """Decide the next move from the task and the tool results so far."""
    task = request.messages[0].content
    order_id = _order_id(task)
    if order_id is None:
        return text_reply(HELP)
    results = _results(request.messages)
    if "lookup_order" not in results:
        return tool_reply(
            ToolCall(id="call_lookup", name="lookup_order", arguments={"order_id": order_id})
        )
    order = results["lookup_order"]
    if not isinstance(order, dict):
        return text_reply(f"I could not find order {order_id}: {order}")
    if "issue_refund" not in results and "send_email" not in results:
        return tool_reply(*_actions(task, order))
    return text_reply(_summary(order, results))


def _actions(task: str, order: dict[str, Any]) -> list[ToolCall]:
    calls = []
    lowered = task.lower()
    if "refund" in lowered:
        calls.append(
            ToolCall(
                id="call_refund",
                name="issue_refund",
                arguments={"order_id": order["id"], "amount_cents": order["amount_cents"]},
            )
        )
    if "email" in lowered or "tell" in lowered or "notify" in lowered:
        customer = order["customer"]
        amount = f"{order['amount_cents'] / 100:.2f} {order['currency']}"
        calls.append(
            ToolCall(
                id="call_email",
                name="send_email",
                arguments={
                    "to": customer["email"],
                    "subject": f"Your refund for order {order['id']}",
                    "body": f"Hello {customer['name']},\n\nWe have refunded {amount} for order "
                    f"{order['id']}.\n\nBest regards",
                },
            )
        )
    return calls or [
        ToolCall(
            id="call_refund",
            name="issue_refund",
            arguments={"order_id": order["id"], "amount_cents": order["amount_cents"]},
        )
    ]


def _summary(order: dict[str, Any], results: dict[str, Any]) -> str:
    lines = []
    for name, label in (("issue_refund", "Refund"), ("send_email", "Email")):
        if name in results:
            outcome = results[name]
            done = isinstance(outcome, dict) and "error" not in outcome
            lines.append(f"{label}: {'done' if done else outcome}")
    return f"Order {order['id']}: " + "; ".join(lines)


def _order_id(task: str) -> str | None:
    match = re.search(r"\border\s*#?\s*(\d+)", task, re.IGNORECASE) or re.search(
        r"\b(\d{3,})\b", task
    )
    return match.group(1) if match else None


def _results(messages: Any) -> dict[str, Any]:
    names = {call.id: call.name for m in messages for call in m.tool_calls}
    found: dict[str, Any] = {}
    for message in messages:
        if isinstance(message, Message) and message.role == "tool" and message.tool_call_id:
            found[names.get(message.tool_call_id, "?")] = _parse(message)
    return found


def _parse(message: Message) -> Any:
    if message.is_error:
        return message.content
    try:
        return json.loads(message.content)
    except json.JSONDecodeError:
        return message.content
