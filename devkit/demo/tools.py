"""The demo agent's tools: they call the demo payment provider over HTTP.

The refund and the email say what they would do (their previews): the refund's reads the
order from the provider, so an order that changes after the approval stops the refund.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import requests

from agent_runtime import ApprovalPolicy, RetryPolicy, Tool, Tools, UnknownOutcome, tool
from agent_runtime.previews import Preview

TIMEOUT_S = 10
HTTP_RETRY = RetryPolicy(max_attempts=3, initial_interval=timedelta(milliseconds=200))


class ProviderRefused(Exception):
    """The provider answered with an error; the agent sees the message."""

    retryable = False


def demo_tools(provider_url: str, approvers: tuple[str, ...], *, required: int = 1) -> Tools:
    """Return the demo tools bound to the provider at ``provider_url``; each side effect
    needs ``required`` of the ``approvers``."""
    base = provider_url.rstrip("/")
    policy = ApprovalPolicy(
        approvers=approvers,
        required=required,
        deadline=timedelta(hours=4),
        remind_every=timedelta(hours=1),
    )
    return Tools(_lookup_order(base), _issue_refund(base, policy), _send_email(base, policy))


def _lookup_order(base: str) -> Tool:
    def lookup_order(order_id: str) -> Any:
        """Look up an order: customer, amount, currency, status.

        Args:
            order_id: The order number, e.g. "1042".
        """
        return _answer(requests.get(f"{base}/v1/orders/{order_id}", timeout=TIMEOUT_S))

    return tool(lookup_order, retry=HTTP_RETRY)  # type: ignore[call-overload,no-any-return]


def _issue_refund(base: str, policy: ApprovalPolicy) -> Tool:
    def issue_refund(order_id: str, amount_cents: int, idempotency_key: str) -> Any:
        """Refund an order to the customer's card. Irreversible: needs a person's approval.

        Args:
            order_id: The order to refund.
            amount_cents: How much to refund, in cents; at most the order's amount.
        """
        response = requests.post(
            f"{base}/v1/refunds",
            json={"order_id": order_id, "amount_cents": amount_cents},
            headers={"Idempotency-Key": idempotency_key},
            timeout=TIMEOUT_S,
        )
        return _answer(response)

    def verify(idempotency_key: str) -> Any:
        response = requests.get(
            f"{base}/v1/refunds", params={"idempotency_key": idempotency_key}, timeout=TIMEOUT_S
        )
        return None if response.status_code == 404 else _answer(response)

    def preview(args: dict[str, Any]) -> Preview:
        order = _answer(requests.get(f"{base}/v1/orders/{args['order_id']}", timeout=TIMEOUT_S))
        return refund_preview(order, int(args["amount_cents"]))

    return tool(
        side_effect=True,
        approval=policy,
        retry=HTTP_RETRY,
        verify=verify,
        on_unknown_outcome=UnknownOutcome.RETRY,
        preview=preview,
    )(issue_refund)


def refund_preview(order: dict[str, Any], amount_cents: int) -> Preview:
    """What refunding ``amount_cents`` of ``order`` (as the provider shows it) would do."""
    currency = str(order["currency"])
    name = str(order["customer"]["name"])
    refund, total = _money(amount_cents, currency), _money(order["amount_cents"], currency)
    return Preview(
        text=f"Refund {refund} to {name} for order {order['id']}",
        table=(
            ("Customer", f"{name} ({order['customer']['email']})"),
            ("Refund", refund),
            ("Order total", total),
            ("Order status", str(order["status"])),
        ),
    )


def _cut(value: Any, limit: int) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _money(cents: int, currency: str) -> str:
    return f"{cents // 100}.{cents % 100:02d} {currency}"


def _send_email(base: str, policy: ApprovalPolicy) -> Tool:
    def send_email(to: str, subject: str, body: str, idempotency_key: str) -> Any:
        """Send an email to a customer. Needs a person's approval.

        Args:
            to: The recipient's address.
            subject: The subject line.
            body: The plain-text message.
        """
        payload = {"to": to, "subject": subject, "body": body, "dedupe_id": idempotency_key}
        return _answer(requests.post(f"{base}/v1/emails", json=payload, timeout=TIMEOUT_S))

    def preview(args: dict[str, Any]) -> Preview:
        to, subject = _cut(args["to"], 200), _cut(args["subject"], 500)
        return Preview(
            text=f"Email {to}: “{subject}”",
            table=(("To", to), ("Subject", subject), ("Body", _cut(args["body"], 1000))),
        )

    return tool(
        side_effect=True,
        approval=policy,
        retry=HTTP_RETRY,
        on_unknown_outcome=UnknownOutcome.RETRY,
        preview=preview,
    )(send_email)


def _answer(response: requests.Response) -> Any:
    if response.status_code >= 500:
        response.raise_for_status()
    body = response.json()
    if response.status_code >= 400:
        error = body.get("error", {}) if isinstance(body, dict) else {}
        raise ProviderRefused(error.get("message") or f"HTTP {response.status_code}")
    return body
