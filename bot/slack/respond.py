"""Telling the person who acted, through the request's ``response_url``, when the outbox cannot.

A ``response_url`` works without the database and without channel membership, so it is how a
person learns that their acknowledged click or command could not be carried out.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.webhook import WebhookClient

logger = logging.getLogger(__name__)

TIMEOUT_S = 5


def response_url_of(body: dict[str, Any]) -> str | None:
    """Return the request's ``response_url`` (a click's, a command's or a modal's first)."""
    url = body.get("response_url")
    if not url:
        urls = body.get("response_urls") or []
        url = urls[0].get("response_url") if urls and isinstance(urls[0], dict) else None
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


def respond(body: dict[str, Any], text: str) -> bool:
    """Show ``text`` to the person who sent ``body``, as an ephemeral message; True if sent."""
    url = response_url_of(body)
    if url is None:
        return False
    try:
        answer = WebhookClient(url, timeout=TIMEOUT_S).send(
            text=text, response_type="ephemeral", replace_original=False
        )
    except OSError:
        logger.warning("response_url unreachable", extra={"action": "respond"})
        return False
    return answer.status_code == 200


__all__ = ["respond", "response_url_of"]
