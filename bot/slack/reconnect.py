"""Carrying a person's acknowledged action through database reconnects."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from agent_runtime import StoreUnavailable

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconnect:
    """How long to keep retrying an action whose database connection failed."""

    within: timedelta = timedelta(seconds=30)
    first_delay: timedelta = timedelta(milliseconds=50)
    max_delay: timedelta = timedelta(seconds=2)

    def call(self, action: Callable[[], T], *, sleep: Callable[[float], None] = time.sleep) -> T:
        """Return ``action()``, retried while it raises ``StoreUnavailable`` within ``within``.

        Every action retried here is a compare-and-set or an idempotent write, so a retry
        after a commit whose answer was lost changes nothing twice.
        """
        deadline = time.monotonic() + self.within.total_seconds()
        delay = self.first_delay.total_seconds()
        while True:
            try:
                return action()
            except StoreUnavailable:
                if time.monotonic() + delay > deadline:
                    raise
            sleep(delay)
            delay = min(delay * 2, self.max_delay.total_seconds())


BEFORE_ACK = Reconnect(within=timedelta(seconds=1.5), max_delay=timedelta(milliseconds=400))
"""For work that must answer within Slack's 3 s (a modal's submission)."""
AFTER_ACK = Reconnect()
"""For work after the acknowledgement (a click's decision)."""

__all__ = ["AFTER_ACK", "BEFORE_ACK", "Reconnect"]
