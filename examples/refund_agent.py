"""A support agent that looks orders up and refunds them once a finance approver agrees."""

from datetime import timedelta
from typing import Any

from agent_runtime import Agent, ApprovalPolicy, Budget, RetryPolicy, Tools, UnknownOutcome, tool

ORDERS = {"1042": {"id": "1042", "status": "delivered", "amount_cents": 4999}}
"""Stands in for the shop's order database."""

REFUNDS: dict[str, dict[str, Any]] = {}
"""Stands in for the payment provider, which refunds at most once per idempotency key."""


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up.

    Args:
        order_id: The order number.
    """
    return ORDERS.get(order_id) or {"error": f"no order {order_id}"}


@tool(
    side_effect=True,
    approval=ApprovalPolicy(
        groups=("finance",),
        required=1,
        deadline=timedelta(hours=4),
        remind_every=timedelta(hours=1),
    ),
    retry=RetryPolicy(max_attempts=3),
    on_unknown_outcome=UnknownOutcome.RETRY,
)
def issue_refund(order_id: str, amount_cents: int, idempotency_key: str) -> dict[str, Any]:
    """Refund an order. Irreversible.

    Args:
        order_id: The order to refund.
        amount_cents: How much, in cents.
    """
    refund = {"order_id": order_id, "refunded_cents": amount_cents}
    return REFUNDS.setdefault(idempotency_key, refund)  # a retry with the key changes nothing


support = Agent(
    name="support",
    model="openai:gpt-4o-mini",  # the key comes from OPENAI_API_KEY where it is deployed
    system_prompt="You are a careful support agent.",
    tools=Tools(lookup_order, issue_refund),
    budget=Budget(cost_usd=0.50, tokens=200_000, model_calls=30),
    approver_groups={"finance": ("U_DANA", "U_OMAR")},
)
