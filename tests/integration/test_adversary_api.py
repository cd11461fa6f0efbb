"""The approvals API against a client whose key is taken away while it waits."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_runtime import SystemClock
from tests.integration import cli_ok, wait_until
from tests.integration.api_server import ApiServer, Waiting, api_server

ARGS = {"account": "acme", "amount": 120}


@pytest.fixture
def api(sqlite_url: str) -> Iterator[ApiServer]:
    """The approvals API on SQLite."""
    with api_server(sqlite_url) as served:
        yield served


def test_a_key_revoked_during_a_long_poll_is_not_told_the_decision(api: ApiServer) -> None:
    """A long poll whose key is revoked before the decision gets 401, not the approved call."""
    created = api.post({"tool": "refund", "arguments": ARGS}).json()
    poll = Waiting(lambda: api.get(created["id"], wait=30))
    wait_until(lambda: api.api.waiting == 1, timeout=10, what="the long poll to wait")
    assert api.keys.revoke(api.client.name, SystemClock().now())
    cli_ok(api.env, "approve", created["id"], "--as", "U_APPROVER")
    answer = poll.result()
    assert answer.status_code == 401, answer.text
    assert "approved_arguments" not in answer.json()


@pytest.mark.parametrize("seconds", [1e20, 3e11], ids=["beyond timedelta", "beyond year 9999"])
def test_a_deadline_too_far_away_is_a_400_that_stores_nothing(
    api: ApiServer, seconds: float
) -> None:
    """A policy deadline no date can hold is refused with a 400, and no request is kept."""
    answer = api.post(
        {"tool": "refund", "arguments": ARGS, "policy": {"deadline_seconds": seconds}}
    )
    assert answer.status_code == 400, answer.text
    assert "deadline_seconds must be at most 31,536,000 (a year)" in answer.text
    assert api.services.approvals.store.list_approvals() == []
    assert api.services.runtime.runs() == []
