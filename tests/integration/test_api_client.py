"""The Python client of the approvals API, against the API served over loopback on SQLite,
with people deciding through the ``signoff`` command line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agent_runtime import ApprovalStatus
from bot.client import ApiRefused, Approved, Rejected, SignoffClient, approval_required
from tests.integration import cli_ok, wait_until
from tests.integration.api_server import ApiServer, Waiting, api_server


@pytest.fixture
def api(sqlite_url: str) -> Iterator[ApiServer]:
    """The approvals API on a SQLite file."""
    with api_server(sqlite_url) as served:
        yield served


def _pending_id(api: ApiServer) -> str:
    """Wait for the client's one pending approval to be asked and return its id."""

    def pending() -> str | None:
        found = api.services.approvals.store.list_approvals(status=ApprovalStatus.PENDING)
        return found[0].id if found else None

    return wait_until(pending, timeout=30, what="the approval to be asked")


def test_a_rejection_raises_rejected_with_the_reason(api: ApiServer) -> None:
    """``require_approval`` raises ``Rejected`` carrying the reason the person gave."""
    client = SignoffClient(api.url, api.client.key)
    waiting = Waiting(lambda: client.require_approval("wipe", {"table": "users"}))
    cli_ok(api.env, "reject", _pending_id(api), "--as", "U_APPROVER", "--reason", "not today")
    raised = waiting.result()
    assert isinstance(raised, Rejected)
    assert raised.reason == "not today"


def test_the_decorated_function_runs_once_with_the_edited_arguments(api: ApiServer) -> None:
    """A function under ``@approval_required`` waits for sign-off, then runs once with
    exactly the arguments the person approved (here edited), not the ones it was called with."""
    client = SignoffClient(api.url, api.client.key)
    calls: list[dict[str, Any]] = []

    @approval_required(client, tool="refund", timeout=30)
    def refund(account: str, amount: int = 10) -> str:
        calls.append({"account": account, "amount": amount})
        return f"refunded {amount} to {account}"

    waiting = Waiting(lambda: refund("acme"))
    approval = _pending_id(api)
    assert calls == []
    cli_ok(
        api.env,
        "edit",
        approval,
        "--as",
        "U_APPROVER",
        "--args",
        json.dumps({"account": "acme", "amount": 5}),
    )
    assert waiting.result() == "refunded 5 to acme"
    assert calls == [{"account": "acme", "amount": 5}]


def test_require_approval_returns_the_approved_call(api: ApiServer) -> None:
    """An approval gives ``Approved`` with the arguments, their hash and the approver."""
    client = SignoffClient(api.url, api.client.key)
    waiting = Waiting(
        lambda: client.require_approval("send", {"to": "a@example.com"}, idempotency_key="send-1")
    )
    cli_ok(api.env, "approve", _pending_id(api), "--as", "U_APPROVER")
    approved = waiting.result()
    assert isinstance(approved, Approved)
    assert approved.arguments == {"to": "a@example.com"}
    assert approved.approver is not None
    assert approved.approver["user_id"] == "U_APPROVER"
    again = client.require_approval("send", {"to": "a@example.com"}, idempotency_key="send-1")
    assert again.approval_id == approved.approval_id


def test_a_bad_key_is_refused(api: ApiServer) -> None:
    """A client with a wrong key gets ``ApiRefused`` with status 401."""
    with pytest.raises(ApiRefused) as refused:
        SignoffClient(api.url, "sk_signoff_nope").require_approval("wipe", {})
    assert refused.value.status == 401


def test_api_keys_are_created_listed_and_revoked_with_the_cli(api: ApiServer) -> None:
    """``signoff api-key create --json`` shows a key that works once; ``list`` never shows
    it; ``revoke`` makes it fail with 401."""
    made = json.loads(cli_ok(api.env, "api-key", "create", "--name", "ci-bot", "--json"))
    assert made["key"].startswith("sk_signoff_")
    assert made["webhook_secret"].startswith("whsec_")
    assert api.post({"tool": "t", "arguments": {}}, key=made["key"]).status_code == 201
    listed = cli_ok(api.env, "api-key", "list", "--json")
    assert "ci-bot" in listed
    assert made["key"] not in listed
    cli_ok(api.env, "api-key", "revoke", "ci-bot")
    assert api.post({"tool": "t", "arguments": {}}, key=made["key"]).status_code == 401
