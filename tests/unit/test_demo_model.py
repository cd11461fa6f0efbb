"""The demo model's plan: refunds first, and an email claiming a refund only once it is done."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agent_runtime.models.base import Message, ModelRequest, ToolCall
from devkit.demo.model import respond

Outcome = Callable[[ToolCall], tuple[str, bool]]
"""What a tool call returned: its content and whether it is an error."""


def order(order_id: str) -> dict[str, Any]:
    """An order as the demo provider's lookup returns it."""
    return {
        "id": order_id,
        "amount_cents": 4999,
        "currency": "USD",
        "customer": {"name": "Dana Example", "email": "dana@example.com"},
    }


def succeeding(call: ToolCall) -> tuple[str, bool]:
    """Every call succeeds: lookups find the order, refunds and emails are made."""
    if call.name == "lookup_order":
        return json.dumps(order(call.arguments["order_id"])), False
    return json.dumps({"id": f"{call.name}-{call.id}"}), False


def refusing(refused: set[str], *, as_error: bool) -> Outcome:
    """Refunds of ``refused`` orders are rejected (an error result) or fail (an error field)."""

    def outcome(call: ToolCall) -> tuple[str, bool]:
        if call.name == "issue_refund" and call.arguments["order_id"] in refused:
            if as_error:
                return "not executed: rejected by dana: over the limit", True
            return json.dumps({"error": "card_declined"}), False
        return succeeding(call)

    return outcome


def converse(task: str, outcome: Outcome = succeeding) -> tuple[list[list[ToolCall]], str]:
    """Drive the model to its answer; return the calls of each turn and the answer."""
    messages = [Message(role="user", content=task)]
    turns: list[list[ToolCall]] = []
    while len(turns) < 10:
        reply = respond(ModelRequest(system="", messages=messages)).message
        if not reply.tool_calls:
            return turns, reply.content
        turns.append(list(reply.tool_calls))
        messages.append(reply)
        for call in reply.tool_calls:
            content, is_error = outcome(call)
            messages.append(
                Message(role="tool", content=content, tool_call_id=call.id, is_error=is_error)
            )
    raise AssertionError(f"no answer after {turns}")


def names(turns: list[list[ToolCall]]) -> list[list[str]]:
    """The tool names of each turn."""
    return [[c.name for c in turn] for turn in turns]


def test_the_email_is_proposed_only_in_the_turn_after_the_refund_is_done() -> None:
    """Lookup, then the refund alone, then the email telling of it, then the answer."""
    turns, answer = converse("refund order 1042 and email the customer")
    assert names(turns) == [["lookup_order"], ["issue_refund"], ["send_email"]]
    assert "We have refunded 49.99 USD for order 1042." in turns[2][0].arguments["body"]
    assert answer == "Order 1042: Refund: done; Email: done"


def test_a_rejected_refund_is_never_followed_by_an_email() -> None:
    """A rejected refund ends the run without proposing the email, and the answer says why."""
    turns, answer = converse(
        "refund order 1042 and email the customer", refusing({"1042"}, as_error=True)
    )
    assert names(turns) == [["lookup_order"], ["issue_refund"]]
    assert answer == (
        "Order 1042: Refund: not executed: rejected by dana: over the limit; "
        "Email: not sent, as no refund was made"
    )


def test_a_failed_refund_is_never_followed_by_an_email() -> None:
    """A refund the provider refused (an error in its result) is not announced either."""
    turns, answer = converse(
        "refund order 1042 and email the customer", refusing({"1042"}, as_error=False)
    )
    assert names(turns) == [["lookup_order"], ["issue_refund"]]
    assert answer.endswith("Email: not sent, as no refund was made")


def test_refunds_of_several_orders_are_asked_together_and_emails_follow_each_done_one() -> None:
    """Two orders: both refunds in one turn; then only the email of the refund that was made."""
    turns, answer = converse(
        "refund orders 1042 and 1043 and email the customers", refusing({"1043"}, as_error=True)
    )
    assert names(turns) == [
        ["lookup_order", "lookup_order"],
        ["issue_refund", "issue_refund"],
        ["send_email"],
    ]
    assert "order 1042" in turns[2][0].arguments["body"]
    assert answer.splitlines() == [
        "Order 1042: Refund: done; Email: done",
        "Order 1043: Refund: not executed: rejected by dana: over the limit; "
        "Email: not sent, as no refund was made",
    ]


def test_an_email_without_a_refund_claims_none() -> None:
    """A task asking only for an email proposes it at once, and it speaks of no refund."""
    turns, answer = converse("email the customer of order 1042 about the delay")
    assert names(turns) == [["lookup_order"], ["send_email"]]
    assert "refund" not in json.dumps(turns[1][0].arguments).lower()
    assert answer == "Order 1042: Email: done"


def test_a_rejected_refund_that_no_email_was_asked_for_mentions_no_email() -> None:
    """A refund-only task whose refund is rejected answers about the refund alone."""
    turns, answer = converse("please refund order #1042", refusing({"1042"}, as_error=True))
    assert names(turns) == [["lookup_order"], ["issue_refund"]]
    assert answer == "Order 1042: Refund: not executed: rejected by dana: over the limit"
