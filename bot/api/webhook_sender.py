"""Delivers webhooks from the outbox: signed, fenced like Slack notices, retried with backoff.

A 2xx answer delivers a webhook; a refusal (4xx other than 408 and 429), a revoked client
or a callback URL that now reaches an address webhooks may not go to ends it; anything
else (no answer, 5xx, 408, 429) is retried with exponential backoff. A webhook is sent at
least once, and again only if a sender died between sending it and recording its
delivery: receivers drop repeats by ``X-Signoff-Delivery``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

import requests

from agent_runtime import Clock, SystemClock
from agent_runtime.notices import QueuedNotice
from agent_runtime.worker import default_owner
from bot.api.destinations import Destinations, webhook_session
from bot.api.exceptions import RefusedDestination
from bot.api.webhook_signature import DELIVERY, SIGNATURE, TIMESTAMP, sign
from bot.app.wiring import Services
from bot.slack.delivery_errors import backoff
from store import SqlApiStore, SqlOutbox

logger = logging.getLogger(__name__)

RETRIED = frozenset({408, 429})


@dataclass(frozen=True, slots=True, kw_only=True)
class SenderOptions:
    """How long a claim lasts (a send times out at a quarter of it), and backoff's cap."""

    claim_for: timedelta = timedelta(seconds=60)
    backoff_cap: timedelta = timedelta(minutes=5)
    batch: int = 10


class WebhookSender:
    """Takes due webhooks from the outbox and POSTs them, signed, to their callback URLs."""

    def __init__(
        self,
        outbox: SqlOutbox,
        clients: SqlApiStore,
        clock: Clock,
        owner: str,
        destinations: Destinations,
        options: SenderOptions | None = None,
    ) -> None:
        self._outbox = outbox
        self._clients = clients
        self._clock = clock
        self._owner = owner
        self._options = options or SenderOptions()
        self._http = webhook_session(destinations)

    def send_once(self) -> int:
        """Send one batch of due webhooks; return how many were claimed."""
        now = self._clock.now()
        batch = self._outbox.claim_due(
            self._owner,
            now=now,
            until=now + self._options.claim_for,
            limit=self._options.batch,
            webhooks=True,
        )
        for item in batch:
            self._send(item)
        return len(batch)

    def _send(self, item: QueuedNotice) -> None:
        data = item.notice.data
        client = self._clients.key_of(str(data["client"]))
        if client is None or client.revoked_at is not None:
            self._outbox.give_up(item, "the API client was revoked")
            return
        now = self._clock.now()
        if not self._outbox.begin_send(item, now=now, until=now + self._options.claim_for):
            return  # another sender claimed it since
        body = json.dumps(data["body"], sort_keys=True).encode()
        stamp = int(now.timestamp())
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP: str(stamp),
            SIGNATURE: sign(client.webhook_secret, stamp, body),
            DELIVERY: item.notice.key,
        }
        try:
            answer = self._http.post(
                str(data["url"]),
                data=body,
                headers=headers,
                timeout=self._options.claim_for.total_seconds() / 4,
                allow_redirects=False,
            )
        except RefusedDestination as exc:
            logger.error(
                "webhook destination refused", extra={"action": "webhook", "key": item.notice.key}
            )
            self._outbox.give_up(item, without_path(exc.message, str(data["url"])))
            return
        except requests.RequestException as exc:
            self._retry(
                item, f"no answer: {without_path(str(exc), str(data['url']))}", maybe_sent=True
            )
            return
        self._record(item, answer.status_code)

    def _record(self, item: QueuedNotice, status: int) -> None:
        if 200 <= status < 300:
            self._outbox.delivered(item, None, self._clock.now())
        elif 400 <= status < 500 and status not in RETRIED:
            logger.error(
                "webhook refused",
                extra={"action": "webhook", "status": status, "key": item.notice.key},
            )
            self._outbox.give_up(item, f"the receiver answered {status}")
        else:
            self._retry(item, f"the receiver answered {status}", maybe_sent=False)

    def _retry(self, item: QueuedNotice, error: str, *, maybe_sent: bool) -> None:
        wait = backoff(item.attempts, self._options.backoff_cap)
        logger.warning(
            "webhook not delivered",
            extra={"action": "webhook", "reason": error, "key": item.notice.key},
        )
        self._outbox.retry_later(item, self._clock.now() + wait, error, maybe_sent=maybe_sent)


def without_path(error: str, url: str) -> str:
    """``error`` with the callback URL's path and query shown as ``/…``: a receiver may keep
    a secret there, and errors are logged and stored."""
    parts = urlsplit(url)
    hidden = error.replace(url, f"{parts.scheme}://{parts.netloc}/…")
    tail = parts.path + (f"?{parts.query}" if parts.query else "")
    for part in (tail, parts.path, parts.query):
        if part and part != "/":
            hidden = hidden.replace(part, "/…")
    return hidden


def webhook_sender(services: Services) -> WebhookSender:
    """The sender of this process's share of due webhooks (senders on many processes never
    send one webhook twice)."""
    settings = services.settings
    return WebhookSender(
        services.outbox,
        services.stores.api,
        SystemClock(),
        owner=default_owner(),
        destinations=Destinations(settings.webhook_networks),
        options=SenderOptions(
            claim_for=settings.outbox_claim, backoff_cap=settings.outbox_backoff_cap
        ),
    )
