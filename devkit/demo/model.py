"""The demo agent's model: scripted rules, so the demo runs offline and the same every time.

It understands tasks like "refund order 1042 and email the customer" or "refund orders 1042
and 1043": it looks the orders up, proposes their refunds together (several approvals from
one turn, decided one by one or all at once), and only once a refund is done proposes the
email telling that customer so; then it sums up. An email never claims a refund that was not
made: if the refund is rejected or fails, the email is not proposed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agent_runtime.models.base import Message, ModelRequest, ModelResponse, ToolCall
from agent_runtime.models.scripted import ScriptedModel, text_reply, tool_reply

HELP = 'I can refund orders and email customers, e.g. "refund order 1042 and email the customer".'
LOOKUP, REFUND, EMAIL = "lookup_order", "issue_refund", "send_email"


def demo_model() -> ScriptedModel:
    """Return the demo's rule-based model."""
    return ScriptedModel(respond, name="demo-scripted")


def respond(request: ModelRequest) -> ModelResponse:
    """Decide the next move from the task and the tool results so far."""
    task = request.messages[0].content
    order_ids = _order_ids(task)
    if not order_ids:
        return text_reply(HELP)
    results = _results(request.messages)
    lookups = [_lookup(o) for o in order_ids if (LOOKUP, o) not in results]
    if lookups:
        return tool_reply(*lookups)
    orders = [results[(LOOKUP, o)] for o in order_ids]
    missing = [o for o, order in zip(order_ids, orders, strict=True) if not isinstance(order, dict)]
    if missing:
        return text_reply(f"I could not find order {missing[0]}: {results[(LOOKUP, missing[0])]}")
    calls = _next_calls(task.lower(), orders, results)
    if calls:
        return tool_reply(*calls)
    return text_reply(_summary(orders, results, emails=_emails_asked(task.lower())))


def _next_calls(
    task: str, orders: Sequence[dict[str, Any]], results: dict[Any, Any]
) -> list[ToolCall]:
    """The refunds not yet proposed; once every refund is settled, the emails they allow."""
    refunding = "refund" in task or not _emails_asked(task)
    refunds = [_refund(o) for o in orders if refunding and (REFUND, o["id"]) not in results]
    if refunds or not _emails_asked(task):
        return refunds
    return [
        _email(o, refunded=refunding)
        for o in orders
        if (EMAIL, o["id"]) not in results
        and (not refunding or _done(results.get((REFUND, o["id"]))))
    ]


def _emails_asked(task: str) -> bool:
    return "email" in task or "tell" in task or "notify" in task


def _lookup(order_id: str) -> ToolCall:
    return ToolCall(id=f"call_lookup_{order_id}", name=LOOKUP, arguments={"order_id": order_id})


def _refund(order: dict[str, Any]) -> ToolCall:
    return ToolCall(
        id=f"call_refund_{order['id']}",
        name=REFUND,
        arguments={"order_id": order["id"], "amount_cents": order["amount_cents"]},
    )


def _email(order: dict[str, Any], *, refunded: bool) -> ToolCall:
    customer = order["customer"]
    amount = f"{order['amount_cents'] / 100:.2f} {order['currency']}"
    news = (
        f"We have refunded {amount} for order {order['id']}."
        if refunded
        else f"This is an update about your order {order['id']}."
    )
    subject = "Your refund" if refunded else "Your order"
    return ToolCall(
        id=f"call_email_{order['id']}",
        name=EMAIL,
        arguments={
            "to": customer["email"],
            "subject": f"{subject} for order {order['id']}",
            "body": f"Hello {customer['name']},\n\n{news}\n\nBest regards",
        },
    )


def _summary(orders: Sequence[dict[str, Any]], results: dict[Any, Any], *, emails: bool) -> str:
    return "\n".join(_order_summary(order, results, emails=emails) for order in orders)


def _order_summary(order: dict[str, Any], results: dict[Any, Any], *, emails: bool) -> str:
    lines = []
    for name, label in ((REFUND, "Refund"), (EMAIL, "Email")):
        if (name, order["id"]) in results:
            outcome = results[(name, order["id"])]
            lines.append(f"{label}: {'done' if _done(outcome) else outcome}")
    refund_failed = (REFUND, order["id"]) in results and not _done(results[(REFUND, order["id"])])
    if emails and refund_failed and (EMAIL, order["id"]) not in results:
        lines.append("Email: not sent, as no refund was made")
    return f"Order {order['id']}: " + "; ".join(lines)


def _done(outcome: Any) -> bool:
    return isinstance(outcome, dict) and "error" not in outcome


def _order_ids(task: str) -> list[str]:
    """The orders a task names ("order 1042", "orders 1042 and 1043"), else its first number."""
    listed = re.search(r"\borders?\s*#?\s*(\d+(?:\s*(?:,|and|&)\s*#?\s*\d+)*)", task, re.IGNORECASE)
    if listed:
        return list(dict.fromkeys(re.findall(r"\d+", listed.group(1))))
    first = re.search(r"\b(\d{3,})\b", task)
    return [first.group(1)] if first else []


def _results(messages: Sequence[Message]) -> dict[tuple[str, str], Any]:
    """The tool results so far, by tool and order id."""
    calls = {call.id: call for m in messages for call in m.tool_calls}
    found: dict[tuple[str, str], Any] = {}
    for message in messages:
        call = calls.get(message.tool_call_id or "") if message.role == "tool" else None
        if call is not None:
            found[(call.name, _order_of(call))] = _parse(message)
    return found


def _order_of(call: ToolCall) -> str:
    """The order a call is about (an email's is in its id, as its arguments name none)."""
    order = call.arguments.get("order_id")
    return str(order) if order is not None else call.id.rsplit("_", 1)[-1]


def _parse(message: Message) -> Any:
    if message.is_error:
        return message.content
    try:
        return json.loads(message.content)
    except json.JSONDecodeError:
        return message.content
