"""Delivers outbox notices to Slack: in order per run, retried with backoff, honouring 429."""

from __future__ import annotations

import logging
from datetime import timedelta
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime import Approvals, Clock
from agent_runtime.notices import Delivery, Notice, Outbox, QueuedNotice
from bot.slack import blocks
from bot.slack.notifier import CARD, CARD_UPDATE, DM, EPHEMERAL, REPLY, ROOT, root_key

logger = logging.getLogger(__name__)

CLAIM_FOR = timedelta(seconds=60)
NOT_READY_DELAY = timedelta(milliseconds=500)
MAX_BACKOFF = timedelta(minutes=5)


class NotReady(Exception):
    """The message this notice depends on (its thread root, or the card to update) is not out."""


class Dispatcher:
    """Takes due notices from the outbox and sends them with the Slack Web API."""

    def __init__(self, outbox: Outbox, client: WebClient, approvals: Approvals, clock: Clock,
                 owner: str) -> None:
        self._outbox = outbox
        self._client = client
        self._approvals = approvals
        self._clock = clock
        self._owner = owner

    def dispatch_once(self, limit: int = 25) -> int:
        """Deliver what is due now; return how many notices were claimed."""
        now = self._clock.now()
        items = self._outbox.claim_due(self._owner, now=now, until=now + CLAIM_FOR, limit=limit)
        for item in items:
            self._deliver(item)
        return len(items)

    def drain(self, rounds: int = 50) -> None:
        """Dispatch until nothing more is due (bounded)."""
        for _ in range(rounds):
            if not self.dispatch_once():
                return

    def _deliver(self, item: QueuedNotice) -> None:
        now = self._clock.now()
        try:
            self._outbox.delivered(item.id, self._send(item.notice), now)
        except NotReady:
            self._outbox.retry_later(item.id, now + NOT_READY_DELAY, "waits for an earlier message")
        except SlackApiError as exc:
            logger.warning("slack refused a message",
                           extra={"action": "dispatch", "run_id": item.notice.run_id})
            if _permanent(exc):
                self._outbox.give_up(item.id, _describe(exc))
            else:
                self._outbox.retry_later(item.id, now + _delay(exc, item.attempts),
                                         _describe(exc))
        except (URLError, OSError) as exc:
            self._outbox.retry_later(item.id, now + _backoff(item.attempts), str(exc)[:500])

    def _send(self, notice: Notice) -> Delivery | None:
        data = notice.data
        if notice.kind == ROOT:
            text, body = blocks.run_root(str(notice.run_id), data["task"], data["requester"],
                                         data["agent"], fork=data.get("fork"))
            return self._post(data["channel"], text, body)
        if notice.kind == REPLY:
            root = self._root(notice)
            return self._post(root.channel, data["text"], None, thread_ts=root.ts)
        if notice.kind == CARD:
            root = self._root(notice)
            text, body = blocks.approval_card(self._approvals.get(data["approval_id"]))
            return self._post(root.channel, text, body, thread_ts=root.ts)
        if notice.kind == DM:
            channel = self._client.conversations_open(users=data["user"])["channel"]["id"]
            text, body = blocks.approval_card(self._approvals.get(data["approval_id"]))
            return self._post(channel, text, body)
        if notice.kind == CARD_UPDATE:
            return self._update(data["target"], data["approval_id"])
        if notice.kind == EPHEMERAL:
            self._client.chat_postEphemeral(channel=data["channel"], user=data["user"],
                                            text=data["text"], blocks=data.get("blocks"),
                                            thread_ts=data.get("thread_ts"))
            return None
        raise ValueError(f"unknown notice kind {notice.kind!r}")

    def _root(self, notice: Notice) -> Delivery:
        root = self._outbox.delivery_of(root_key(str(notice.run_id)))
        if root is None:
            raise NotReady()
        return root

    def _update(self, target: str, approval_id: str) -> Delivery | None:
        card = self._outbox.delivery_of(target)
        if card is None:
            raise NotReady()
        text, body = blocks.approval_card(self._approvals.get(approval_id))
        self._client.chat_update(channel=card.channel, ts=card.ts, text=text, blocks=body)
        return None

    def _post(self, channel: str, text: str, body: list[blocks.Block] | None, *,
              thread_ts: str | None = None) -> Delivery:
        response = self._client.chat_postMessage(channel=channel, text=text, blocks=body,
                                                 thread_ts=thread_ts, unfurl_links=False,
                                                 unfurl_media=False)
        return Delivery(channel=str(response["channel"]), ts=str(response["ts"]))


PERMANENT_ERRORS = frozenset({
    "channel_not_found", "not_in_channel", "is_archived", "user_not_found",
    "user_not_visible", "cannot_dm_bot", "invalid_blocks", "msg_too_long", "no_text",
    "message_not_found", "cant_update_message",
})
"""Slack errors that no retry will cure for this notice. Token and scope errors are not
among them: they hit every notice alike and are cured by fixing the app's configuration,
so those notices wait, with backoff."""


def _permanent(exc: SlackApiError) -> bool:
    return exc.response is not None and exc.response.get("error") in PERMANENT_ERRORS


def _delay(exc: SlackApiError, attempts: int) -> timedelta:
    if exc.response.status_code == 429:
        retry_after = exc.response.headers.get("Retry-After", "1")
        return timedelta(seconds=float(retry_after) if str(retry_after).isdigit() else 1.0)
    return _backoff(attempts)


def _backoff(attempts: int) -> timedelta:
    return min(timedelta(seconds=0.5 * 2 ** max(0, attempts - 1)), MAX_BACKOFF)


def _describe(exc: SlackApiError) -> str:
    error = exc.response.get("error") if exc.response is not None else None
    return f"slack: {error or exc}"[:500]


__all__ = ["Dispatcher", "NotReady"]
