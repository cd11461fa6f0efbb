"""Webhooks of decided API approvals: queued with the decision, delivered once through
the outbox with retries, signed so that the documented check accepts them."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from agent_runtime import SystemClock
from bot.api.webhook_sender import SenderOptions, WebhookSender
from bot.api.webhook_signature import DELIVERY, SIGNATURE, TIMESTAMP, verify
from bot.app.serving import ServingThread
from store.models import outbox
from store.outbox import WEBHOOK
from tests.integration import WorkerProcess, cli_ok, wait_until
from tests.integration.api_server import ApiServer, api_server
from tests.integration.webhook_receiver import LOOPBACK_ALLOWED, Receiver


@pytest.fixture(params=["sqlite_url", "pg_url"])
def api(request: pytest.FixtureRequest) -> Iterator[ApiServer]:
    """The approvals API on each database in turn."""
    with api_server(request.getfixturevalue(request.param)) as served:
        yield served


def test_a_decision_is_posted_once_signed_after_a_failed_attempt(api: ApiServer) -> None:
    """A decided approval with a callback URL is POSTed to it, retried after a 503, and
    delivered exactly once; the signature passes the documented check, and fails it for a
    tampered body, another secret, or an old timestamp; Slack's dispatcher never claims it."""
    receiver = Receiver(failures=1)
    with ServingThread(receiver, "receiver"):
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        created = api.post({"tool": "refund", "arguments": {"n": 1}, "callback_url": url}).json()
        cli_ok(api.env, "approve", created["id"], "--as", "U_APPROVER")
        now = SystemClock().now()
        claimed = api.services.outbox.claim_due("slack", now=now, until=now, limit=50)
        assert [q for q in claimed if q.notice.kind == WEBHOOK] == []
        sender = WebhookSender(
            api.services.outbox,
            api.keys,
            SystemClock(),
            owner="sender",
            destinations=LOOPBACK_ALLOWED,
            options=SenderOptions(backoff_cap=timedelta(milliseconds=100)),
        )
        wait_until(
            lambda: sender.send_once() >= 0 and receiver.answered(200),
            timeout=20,
            what="the webhook to be delivered",
        )
        assert sender.send_once() == 0
        with api.services.store.engine.connect() as conn:
            assert (
                conn.execute(
                    select(outbox.c.status).where(outbox.c.key == f"webhook:{created['id']}")
                ).scalar()
                == "sent"
            )
        assert len(receiver.answered(503)) == 1
        [(_, headers, body)] = receiver.answered(200)
    secret = api.client.webhook_secret
    stamp, signature = headers[TIMESTAMP], headers[SIGNATURE]
    assert headers[DELIVERY] == f"webhook:{created['id']}"
    assert verify(secret, stamp, body, signature)
    assert not verify(secret, stamp, body.replace(b'"n": 1', b'"n": 2'), signature)
    assert not verify("whsec_other", stamp, body, signature)
    assert not verify(secret, stamp, body, signature, now=int(stamp) + 3600)
    sent = json.loads(body)
    assert sent["id"] == created["id"]
    assert sent["status"] == "approved"
    assert sent["approved_arguments"] == {"n": 1}


def test_a_worker_sends_the_webhook_of_a_decision(sqlite_url: str, tmp_path: Path) -> None:
    """With no ``signoff serve`` running, a ``signoff worker`` sends the signed webhook of
    a decision made with the command line."""
    receiver = Receiver(failures=0)
    with ServingThread(receiver, "receiver"), api_server(sqlite_url) as api:
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        created = api.post({"tool": "refund", "arguments": {"n": 3}, "callback_url": url}).json()
        with WorkerProcess(api.env, tmp_path / "worker.log") as worker:
            cli_ok(api.env, "approve", created["id"], "--as", "U_APPROVER")
            [(_, headers, body)] = wait_until(
                lambda: receiver.answered(200), timeout=30, what="the webhook", alive=worker
            )
    assert verify(api.client.webhook_secret, headers[TIMESTAMP], body, headers[SIGNATURE])
    assert json.loads(body)["status"] == "approved"


def test_a_worker_expires_an_undecided_approval_and_sends_its_webhook(
    sqlite_url: str, tmp_path: Path
) -> None:
    """With only a ``signoff worker`` running and nobody asking, an approval left undecided
    expires at its deadline (its run falls due then) and its webhook says so."""
    receiver = Receiver(failures=0)
    with ServingThread(receiver, "receiver"), api_server(sqlite_url) as api:
        url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        policy = {"deadline_seconds": 1}
        created = api.post({"tool": "refund", "policy": policy, "callback_url": url}).json()
        with WorkerProcess(api.env, tmp_path / "worker.log") as worker:
            [(_, _, body)] = wait_until(
                lambda: receiver.answered(200), timeout=30, what="the webhook", alive=worker
            )
    sent = json.loads(body)
    assert (sent["id"], sent["status"]) == (created["id"], "expired")


def test_a_failed_webhook_logs_and_stores_no_part_of_its_path(
    api: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A webhook whose receiver does not answer is retried; its error, logged and stored,
    names the host but none of the callback URL's path or query (a receiver may keep a
    secret there)."""
    with socket.socket() as closed:  # a port nobody listens on once closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"http://127.0.0.1:{port}/hooks/s3cr3t-path?sig=s3cr3t-query"
    created = api.post({"tool": "refund", "arguments": {"n": 2}, "callback_url": url}).json()
    cli_ok(api.env, "approve", created["id"], "--as", "U_APPROVER")
    sender = WebhookSender(
        api.services.outbox, api.keys, SystemClock(), owner="s", destinations=LOOPBACK_ALLOWED
    )
    with caplog.at_level(logging.INFO):
        assert sender.send_once() == 1
    with api.services.store.engine.connect() as conn:
        error = conn.execute(
            select(outbox.c.last_error).where(outbox.c.key == f"webhook:{created['id']}")
        ).scalar()
    assert error is not None
    assert error.startswith("no answer:")
    assert "127.0.0.1" in error
    for text in (error, caplog.text):
        assert "s3cr3t" not in text
