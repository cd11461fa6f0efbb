"""The approvals API: clients ask for sign-off over HTTP, people decide with the usual
tools, and the client gets back exactly what was approved."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.hostile import HOSTILE_IDS, HOSTILE_TEXTS
from tests.integration import cli_ok, wait_until
from tests.integration.api_server import ApiServer, api_server
from tests.integration.in_process import InProcessCli

ARGS = {"account": "acme", "amount": 120}
CONCURRENT = 1000


@pytest.fixture(params=["sqlite_url", "pg_url"])
def api(request: pytest.FixtureRequest) -> Iterator[ApiServer]:
    """The approvals API on each database in turn."""
    with api_server(request.getfixturevalue(request.param)) as served:
        yield served


def _ask(api: ApiServer, **extra: Any) -> dict[str, Any]:
    answer = api.post({"tool": "refund", "arguments": ARGS, **extra})
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


class LongPoll(threading.Thread):
    """A ``GET ?wait=`` made on its own thread, its answer kept."""

    def __init__(self, api: ApiServer, approval_id: str, wait: float = 30) -> None:
        super().__init__(daemon=True)
        self._api, self._id, self._wait = api, approval_id, wait
        self.answer: requests.Response | None = None
        self.start()

    def run(self) -> None:
        """Make the request."""
        self.answer = self._api.get(self._id, wait=self._wait)

    def result(self) -> dict[str, Any]:
        """Wait for the answer and return its body."""
        self.join(60)
        assert self.answer is not None
        assert self.answer.status_code == 200
        body: dict[str, Any] = self.answer.json()
        return body


def test_an_approval_made_with_the_cli_ends_the_long_poll(
    api: ApiServer, cli_here: InProcessCli
) -> None:
    """A created approval is pending, listed by ``signoff approvals --pending``; a
    ``signoff approve`` ends a waiting long poll with the approved arguments and approver."""
    created = _ask(api)
    assert created["status"] == "pending"
    assert created["arguments"] == ARGS
    pending = json.loads(cli_here.ok(api.env, "approvals", "--pending", "--json"))
    assert created["id"] in {a["id"] for a in pending}
    poll = LongPoll(api, created["id"])
    cli_ok(api.env, "approve", created["id"], "--as", "U_APPROVER")
    decided = poll.result()
    assert decided["status"] == "approved"
    assert decided["approved_arguments"] == ARGS
    assert decided["approved_args_hash"] == created["args_hash"]
    assert decided["approver"]["user_id"] == "U_APPROVER"
    assert decided["decided_at"] is not None
    runs = json.loads(cli_here.ok(api.env, "runs", "--json"))
    assert created["run_id"] in {r["id"] for r in runs}


def test_edited_arguments_are_the_ones_returned(api: ApiServer, cli_here: InProcessCli) -> None:
    """An edit made with ``signoff edit`` comes back as the approved arguments and hash."""
    created = _ask(api)
    edited = {"account": "acme", "amount": 80}
    cli_here.ok(api.env, "edit", created["id"], "--args", json.dumps(edited), "--as", "U_APPROVER")
    decided = api.get(created["id"]).json()
    assert decided["status"] == "approved"
    assert decided["approved_arguments"] == edited
    assert decided["approved_args_hash"] != created["args_hash"]


def test_an_undecided_approval_expires_at_its_deadline(api: ApiServer) -> None:
    """Past its deadline an approval nobody decided is expired (fail-closed) and never
    approved."""
    created = _ask(api, policy={"deadline_seconds": 1})
    decided = wait_until(
        lambda: (a := api.get(created["id"], wait=5).json())["status"] != "pending" and a,
        timeout=20,
        what="the deadline",
    )
    assert decided["status"] == "expired"
    assert decided["approved_arguments"] is None


def test_a_wrong_or_revoked_key_is_refused_and_others_approvals_are_hidden(
    api: ApiServer, cli_here: InProcessCli
) -> None:
    """No key, a wrong key and a revoked key get 401; another client's approval is a 404."""
    created = _ask(api)
    other = api.new_client()
    assert api.get(created["id"], key=other.key).status_code == 404
    assert api.post({"tool": "t"}, key="sk_signoff_wrong").status_code == 401
    assert requests.get(f"{api.url}/v1/approvals/{created['id']}", timeout=10).status_code == 401
    cli_here.ok(api.env, "api-key", "revoke", api.client.name)
    assert api.get(created["id"]).status_code == 401
    assert api.post({"tool": "refund", "arguments": ARGS}).status_code == 401


def test_the_same_idempotency_key_makes_one_approval(api: ApiServer) -> None:
    """1,000 concurrent creations with one idempotency key make one approval: one 201, the
    rest 200 with the same id."""
    answers: list[requests.Response] = []
    lock = threading.Lock()

    def create() -> None:
        answer = api.post({"tool": "refund", "arguments": ARGS, "idempotency_key": "k-1"})
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=create) for _ in range(CONCURRENT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * (CONCURRENT - 1) + [201], statuses[:5]
    assert len({a.json()["id"] for a in answers}) == 1
    mine = api.services.approvals.store.list_approvals(run_id=answers[0].json()["run_id"])
    assert len(mine) == 1


def test_long_polls_beyond_the_limit_are_answered_at_once(sqlite_url: str) -> None:
    """With every long-poll slot taken, another ``?wait=`` is answered at once (pending)
    rather than holding one more of the server's threads; the waiting one still ends with
    the decision."""
    with api_server(sqlite_url, waiters=1) as api:
        first, second = _ask(api), _ask(api)
        poll = LongPoll(api, first["id"])
        wait_until(lambda: api.api.waiting == 1, timeout=10, what="the first long poll")
        started = time.monotonic()
        assert api.get(second["id"], wait=30).json()["status"] == "pending"
        assert time.monotonic() - started < 10
        cli_ok(api.env, "approve", first["id"], "--as", "U_APPROVER")
        assert poll.result()["status"] == "approved"


def test_cancelling_the_run_cancels_its_approvals_and_closes_the_conversation(
    api: ApiServer, cli_here: InProcessCli
) -> None:
    """``signoff cancel`` of an API client's run closes its pending approval as cancelled
    (with a webhook queued in the same transaction); a new request in that conversation is
    refused with 409, while another conversation still works."""
    created = _ask(api, conversation_id="c-1", callback_url="http://127.0.0.1:9/hook")
    cli_here.ok(api.env, "cancel", created["run_id"], "--as", "U_APPROVER")
    closed = api.get(created["id"]).json()
    assert closed["status"] == "cancelled"
    assert closed["approved_arguments"] is None
    again = api.post({"tool": "refund", "arguments": ARGS, "conversation_id": "c-1"})
    assert again.status_code == 409
    assert _ask(api, conversation_id="c-2")["run_id"] != created["run_id"]


def test_a_request_may_name_a_policy_of_the_servers_policy_file(
    sqlite_url: str, tmp_path: Path
) -> None:
    """With ``SIGNOFF_API_POLICIES``, a request naming a policy gets its approvers and
    deadline, one naming none gets the file's default, and an unknown name is a 400 that
    asks for nothing."""
    policies = tmp_path / "policies.yaml"
    policies.write_text(
        "approvers: [U_DANA]\ndeadline_seconds: 600\n"
        "tools:\n  payments: {approvers: [U_FIN], deadline_seconds: 120}\n"
    )
    with api_server(sqlite_url, policies=str(policies)) as api:
        named = api.services.approvals.get(_ask(api, policy="payments")["id"]).policy
        default = api.services.approvals.get(_ask(api)["id"]).policy
        unknown = api.post({"tool": "refund", "arguments": ARGS, "policy": "nope"})
        assert (named.approvers, named.deadline) == (("U_FIN",), timedelta(seconds=120))
        assert (default.approvers, default.deadline) == (("U_DANA",), timedelta(seconds=600))
        assert unknown.status_code == 400
        assert "nope" in unknown.json()["error"]
        assert len(api.services.approvals.store.list_approvals()) == 2


def test_an_idempotency_key_reused_for_another_call_is_refused(api: ApiServer) -> None:
    """The same idempotency key with other arguments is a 409, and the first approval
    stays the only one, with its own arguments."""
    first = _ask(api, idempotency_key="k-2")
    other = api.post(
        {
            "tool": "refund",
            "arguments": {"account": "acme", "amount": 9999},
            "idempotency_key": "k-2",
        }
    )
    assert other.status_code == 409
    assert api.services.approvals.store.list_approvals(run_id=first["run_id"]) == [
        api.services.approvals.get(first["id"])
    ]
    assert api.get(first["id"]).json()["arguments"] == ARGS


@pytest.mark.parametrize("hostile", HOSTILE_TEXTS, ids=HOSTILE_IDS)
def test_a_hostile_body_is_a_400_that_stores_nothing(sqlite_url: str, hostile: str) -> None:
    """A body nesting 10,000 levels (a 500 before), or with NaN, Infinity, duplicate keys or
    a lone surrogate, is refused with a 400 that says why, and creates no approval."""
    with api_server(sqlite_url) as api:
        body = '{"tool": "refund", "arguments": {"account": ' + hostile + "}}"
        answer = requests.post(
            f"{api.url}/v1/approvals",
            data=body.encode(),
            headers={"Authorization": f"Bearer {api.client.key}"},
            timeout=30,
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"].startswith("the body holds"), answer.text
        assert api.services.approvals.store.list_approvals() == []
