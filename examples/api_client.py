"""An agent Signoff does not run: before it refunds, it asks Signoff's approvals API.

Run ``signoff serve``, create a key with ``signoff api-key create --name refunds``, then
``python -m examples.api_client --url http://localhost:8080 --key sk_signoff_...``.
"""

import argparse
from collections.abc import Callable
from typing import Any

from bot.client import Expired, Rejected, SignoffClient, approval_required

REFUNDS: dict[str, int] = {}
"""Stands in for the payment provider."""


def refunder(client: SignoffClient, approvers: list[str]) -> Callable[..., dict[str, Any]]:
    """Return ``issue_refund``, which runs only with the arguments a person approved."""

    @approval_required(
        client,
        tool="issue_refund",
        timeout=3600,
        policy={"approvers": approvers, "deadline_seconds": 1800},
    )
    def issue_refund(order_id: str, amount_cents: int) -> dict[str, Any]:
        REFUNDS[order_id] = amount_cents
        return {"refunded": order_id, "amount_cents": amount_cents}

    return issue_refund


def main(argv: list[str] | None = None) -> int:
    """Ask for a refund of order 1042 and say what came of it."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="where signoff serve listens")
    parser.add_argument("--key", required=True, help="the key signoff api-key create showed")
    parser.add_argument("--approver", action="append", default=[], help="a Slack user id")
    args = parser.parse_args(argv)
    issue_refund = refunder(SignoffClient(args.url, args.key), args.approver or ["U_DANA"])
    try:
        print(issue_refund("1042", 4999))
    except Rejected as exc:
        print(f"not refunded: {exc.reason}")
    except Expired:
        print("not refunded: nobody decided in time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
