"""Slack's request signing: what Slack adds to every request it sends to an app.

``X-Slack-Signature`` is ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{raw body}`` keyed with
the app's signing secret; ``X-Slack-Request-Timestamp`` is the Unix time the request was sent.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable

VERSION = "v0"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Return the ``X-Slack-Signature`` value for ``body`` sent at ``timestamp``."""
    base = f"{VERSION}:{timestamp}:".encode() + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return f"{VERSION}={digest}"


def signed_headers(
    secret: str, body: bytes, *, content_type: str, clock: Callable[[], float] = time.time
) -> dict[str, str]:
    """Return the headers Slack sends with ``body``: content type, timestamp and signature."""
    timestamp = str(int(clock()))
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature(secret, timestamp, body),
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }


def verify(
    secret: str,
    timestamp: str,
    body: bytes,
    given: str,
    *,
    now: float | None = None,
    tolerance_s: int = 300,
) -> bool:
    """Check a signature as an app does: the right HMAC, and a timestamp within 5 minutes."""
    try:
        sent = int(timestamp)
    except ValueError:
        return False
    current = time.time() if now is None else now
    if abs(current - sent) > tolerance_s:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), given)
