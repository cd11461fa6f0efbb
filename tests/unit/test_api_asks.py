"""What ``POST /v1/approvals`` accepts, and the policy a request is asked under."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from bot.api.asks import read_ask
from bot.api.exceptions import BadRequest
from bot.mcp.policy import GatePolicy, ToolRule


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ([], "JSON object"),
        ({"tool": "t", "surprise": 1}, "JSON object"),
        ({"tool": ""}, "'tool'"),
        ({"tool": "t", "arguments": [1]}, "'arguments'"),
        ({"tool": "t", "policy": {"required": 0}}, "positive"),
        ({"tool": "t", "policy": {"gated": False}}, "'gated'"),
        ({"tool": "t", "idempotency_key": "k" * 201}, "'idempotency_key'"),
        ({"tool": "t", "callback_url": "file:///etc/passwd"}, "'callback_url'"),
    ],
)
def test_a_malformed_request_is_refused_saying_why(body: Any, complaint: str) -> None:
    """Each malformed body is a ``BadRequest`` naming what is wrong."""
    with pytest.raises(BadRequest, match=complaint):
        read_ask(body)


def test_the_requests_rule_goes_over_the_servers_default() -> None:
    """A request's own rule overrides what it says of the server's default and keeps the
    rest; with no approvers anywhere, the configured ones apply."""
    server = GatePolicy(default=ToolRule(required=2, approvers=("U_A", "U_B", "U_C")))
    ask = read_ask({"tool": "t", "arguments": {"x": 1}, "policy": {"deadline_seconds": 30}})
    policy = ask.policy(server, ("U_CONFIGURED",), {})
    assert (policy.approvers, policy.required, policy.deadline) == (
        ("U_A", "U_B", "U_C"),
        2,
        timedelta(seconds=30),
    )
    bare = read_ask({"tool": "t"}).policy(GatePolicy(), ("U_CONFIGURED",), {})
    assert bare.approvers == ("U_CONFIGURED",)
    assert read_ask({"tool": "t"}).idempotency_key != read_ask({"tool": "t"}).idempotency_key
