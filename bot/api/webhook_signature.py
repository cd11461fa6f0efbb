"""How Signoff signs its webhooks, and how a receiver checks them.

Each webhook is a POST of a JSON body with ``X-Signoff-Timestamp: T`` (Unix seconds) and
``X-Signoff-Signature: v1=HEX``, HEX being the HMAC-SHA256, under the client's webhook
secret (shown once by ``signoff api-key create``), of ``v1:T:`` followed by the body's
exact bytes. A receiver recomputes it over the raw body, compares in constant time, and
refuses timestamps more than five minutes away from its clock (replays).
"""

from __future__ import annotations

import hashlib
import hmac
import time

TIMESTAMP = "X-Signoff-Timestamp"
SIGNATURE = "X-Signoff-Signature"
DELIVERY = "X-Signoff-Delivery"
TOLERANCE = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """Return the ``X-Signoff-Signature`` value of ``body`` sent at ``timestamp``."""
    message = f"v1:{timestamp}:".encode() + body
    return "v1=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(
    secret: str,
    timestamp: str,
    body: bytes,
    signature: str,
    *,
    now: float | None = None,
    tolerance: float = TOLERANCE,
) -> bool:
    """Tell whether ``signature`` is Signoff's for ``body`` at ``timestamp``, recent enough."""
    if not (timestamp.isascii() and timestamp.isdigit()):
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, int(timestamp), body), signature)
