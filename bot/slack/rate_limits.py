"""Back-pressure from Slack's 429s: which kind of call must wait, and until when.

Slack limits ``chat.postMessage`` per channel and other methods per workspace, so a 429
holds back one lane (a method, and for posts a channel) in this process: the dispatcher's
other notices on that lane wait without calling Slack, and other lanes go on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime

PER_CHANNEL = frozenset({"chat.postMessage"})
EVERYTHING = "*"
"""The lane held while Slack cannot be reached at all."""


@dataclass(frozen=True, slots=True)
class Lane:
    """A kind of Slack call that Slack limits as one: a method, and a channel for posts."""

    method: str
    channel: str | None = None

    @classmethod
    def of(cls, method: str, channel: str | None) -> Lane:
        """Return the lane of a call of ``method`` to ``channel``."""
        return cls(method, channel if method in PER_CHANNEL else None)


class RateLimits:
    """The lanes held back, each until a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[Lane, datetime] = {}

    def hold(self, lane: Lane, until: datetime) -> None:
        """Hold ``lane`` back until ``until`` (never shortening a longer hold)."""
        with self._lock:
            current = self._until.get(lane)
            self._until[lane] = until if current is None else max(current, until)

    def held_until(self, lane: Lane, now: datetime) -> datetime | None:
        """Return until when a call on ``lane`` must wait, or None if it may go now."""
        with self._lock:
            found = [
                u for key in (lane, Lane(EVERYTHING)) if (u := self._until.get(key)) and u > now
            ]
        return max(found, default=None)
