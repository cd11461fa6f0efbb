"""Pacing posts per channel as Slack asks: about one message a second, with short bursts.

Slack allows roughly one ``chat.postMessage`` per second in each channel, tolerating short
bursts, and answers 429 beyond. A token bucket per channel keeps this process under it: a
post that finds no token waits (its notice is retried when one frees up) while posts to
other channels go on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

MAX_CHANNELS = 1024
"""Buckets kept before full (idle) ones are forgotten."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pace:
    """How fast one channel may be posted to: one post per ``every``, ``burst`` at once."""

    every: timedelta = timedelta(seconds=1)
    burst: int = 3


class ChannelPacing:
    """A token bucket per channel."""

    def __init__(self, pace: Pace) -> None:
        self._pace = pace
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, datetime]] = {}

    def take(self, channel: str, now: datetime) -> datetime | None:
        """Take a post slot in ``channel`` now: None if taken, else when the next one frees."""
        with self._lock:
            if len(self._buckets) > MAX_CHANNELS:
                self._forget_idle(now)
            tokens = self._tokens(channel, now)
            if tokens >= 1:
                self._buckets[channel] = (tokens - 1, now)
                return None
            self._buckets[channel] = (tokens, now)
            return now + self._pace.every * (1 - tokens)

    def _tokens(self, channel: str, now: datetime) -> float:
        held = self._buckets.get(channel)
        if held is None:
            return float(self._pace.burst)
        tokens, since = held
        return min(float(self._pace.burst), tokens + max(0.0, (now - since) / self._pace.every))

    def _forget_idle(self, now: datetime) -> None:
        full = [c for c in self._buckets if self._tokens(c, now) >= self._pace.burst]
        for channel in full:
            del self._buckets[channel]


__all__ = ["ChannelPacing", "Pace"]
