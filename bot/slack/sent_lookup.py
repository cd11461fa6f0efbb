"""Finding a message already posted for a notice, by the metadata it was posted with.

``chat.postMessage`` has no idempotency key. Each message the dispatcher posts carries
message metadata naming its notice; before posting again a notice whose earlier send may
have landed (the process died, or lost its database, between Slack's answer and the
record of it), the dispatcher looks for that metadata among the channel's or thread's
messages since that send began.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime.notices import Delivery
from bot.slack.delivery_errors import slack_error

logger = logging.getLogger(__name__)

EVENT_TYPE = "signoff_notice"
CLOCK_SKEW = timedelta(minutes=2)
"""How much earlier than our record of the send Slack's clock may have stamped the message."""
PAGE_SIZE = 200
MAX_PAGES = 5
UNSEARCHABLE = frozenset(
    {"missing_scope", "not_in_channel", "channel_not_found", "thread_not_found"}
)
"""Refusals that mean we cannot look: the notice is then sent again (at least once)."""


def metadata(key: str) -> dict[str, Any]:
    """The message metadata that names the notice ``key``."""
    return {"event_type": EVENT_TYPE, "event_payload": {"notice": key}}


def find_sent(
    client: WebClient, key: str, *, channel: str, thread_ts: str | None, since: datetime | None
) -> Delivery | None:
    """Return where the notice ``key`` was already posted in the channel (or thread), if it was.

    Transient failures propagate (the caller retries); a refusal to let us look is logged and
    answered with None.
    """
    oldest = "0" if since is None else f"{(since - CLOCK_SKEW).timestamp():.6f}"
    cursor: str | None = None
    try:
        for _ in range(MAX_PAGES):
            page = _page(client, channel, thread_ts, oldest, cursor)
            found = next((m for m in page.get("messages") or [] if _names(m, key)), None)
            if found is not None:
                return Delivery(channel=channel, ts=str(found["ts"]))
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None:
                return None
    except SlackApiError as exc:
        if slack_error(exc) not in UNSEARCHABLE:
            raise
        logger.warning(
            "cannot look for an earlier send; sending again",
            extra={"action": "dispatch", "key": key, "error": slack_error(exc)},
        )
    return None


def _page(
    client: WebClient, channel: str, thread_ts: str | None, oldest: str, cursor: str | None
) -> Any:
    if thread_ts is None:
        return client.conversations_history(
            channel=channel,
            oldest=oldest,
            cursor=cursor,
            limit=PAGE_SIZE,
            include_all_metadata=True,
        )
    return client.conversations_replies(
        channel=channel,
        ts=thread_ts,
        oldest=oldest,
        cursor=cursor,
        limit=PAGE_SIZE,
        include_all_metadata=True,
    )


def _names(message: Any, key: str) -> bool:
    meta = message.get("metadata") if isinstance(message, dict) else None
    if not isinstance(meta, dict) or meta.get("event_type") != EVENT_TYPE:
        return False
    payload = meta.get("event_payload")
    return isinstance(payload, dict) and payload.get("notice") == key
