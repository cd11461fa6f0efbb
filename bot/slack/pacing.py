"""Pacing posts per channel as Slack asks: about one message a second, with short bursts.

Slack allows roughly one ``chat.postMessage`` per second in each channel, tolerating short
bursts, and answers 429 beyond. Each channel is a token bucket, kept as the time its next
post is due (the generic cell rate algorithm): a post beyond the burst is booked the next
free slot of its channel and waits for it (its notice is retried then), so the notices of
a busy channel queue one slot apart instead of all retrying at once, and posts to other
channels go on meanwhile.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

MAX_ENTRIES = 1024
"""Channels and bookings kept before idle and stale ones are forgotten."""
STALE_AFTER = timedelta(minutes=5)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pace:
    """How fast one channel may be posted to: one post per ``every``, ``burst`` at once."""

    every: timedelta = timedelta(seconds=1)
    burst: int = 3


class ChannelPacing:
    """The post slots of each channel, and the slots booked for posts that wait."""

    def __init__(self, pace: Pace) -> None:
        self._pace = pace
        self._lock = threading.Lock()
        self._due: dict[str, datetime] = {}
        self._booked: dict[str, datetime] = {}

    def slot(self, channel: str, key: str, now: datetime) -> datetime | None:
        """Return None if the post ``key`` may go to ``channel`` now, else its booked slot."""
        with self._lock:
            booked = self._booked.pop(key, None)
            if booked is not None:
                if booked > now:
                    self._booked[key] = booked
                    return booked
                return None
            return self._book(channel, key, now)

    def _book(self, channel: str, key: str, now: datetime) -> datetime | None:
        if len(self._due) + len(self._booked) > MAX_ENTRIES:
            self._forget_stale(now)
        due = max(self._due.get(channel, now), now)
        earliest = due - self._pace.every * (self._pace.burst - 1)
        self._due[channel] = due + self._pace.every
        if earliest <= now:
            return None
        self._booked[key] = earliest
        return earliest

    def _forget_stale(self, now: datetime) -> None:
        self._due = {c: d for c, d in self._due.items() if d > now}
        self._booked = {k: b for k, b in self._booked.items() if b > now - STALE_AFTER}


__all__ = ["ChannelPacing", "Pace"]
