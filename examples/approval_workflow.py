"""A refund workflow: look the amount up, wait for a person's approval, refund, follow up."""

from datetime import timedelta
from typing import Any

from agent_runtime import RetryPolicy, RunContext, Workflows

AMOUNTS = {"1042": 4999}
"""Stands in for the shop's order database."""

REFUNDS: dict[str, dict[str, Any]] = {}
"""Stands in for the payment provider, which refunds at most once per idempotency key."""

FOLLOW_UPS: list[str] = []
"""Stands in for the mail server."""


def look_up_amount(order_id: str) -> int:
    """Return what the order cost, in cents."""
    return AMOUNTS[order_id]


def pay_refund(order_id: str, amount_cents: int, key: str) -> dict[str, Any]:
    """Refund the order; the provider de-duplicates on ``key``, so a retry is harmless."""
    return REFUNDS.setdefault(key, {"order_id": order_id, "refunded_cents": amount_cents})


def send_follow_up(order_id: str) -> None:
    """Ask the customer whether the refund arrived."""
    FOLLOW_UPS.append(order_id)


workflows = Workflows()


@workflows.register("refunds.issue")
def issue_refund(ctx: RunContext, order: dict[str, Any]) -> dict[str, Any]:
    """Refund ``order`` once a person approves, and follow up a day later."""
    amount = ctx.step(look_up_amount, order["id"], timeout=timedelta(seconds=10))  # journaled once
    decision = ctx.wait_for("approval", timeout=timedelta(hours=4))  # durable, any process
    key = ctx.uuid()  # the same on every retry
    refund = ctx.step(pay_refund, order["id"], amount, key, retry=RetryPolicy(max_attempts=5))
    ctx.sleep(timedelta(days=1))  # durable timer
    ctx.step(send_follow_up, order["id"])
    return {"refund": refund, "approved_by": decision["by"], "at": ctx.now().isoformat()}
