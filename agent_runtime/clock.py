"""Where the runtime reads the time and sleeps; swapped for a frozen clock in tests."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """The time source of the runtime."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware in UTC."""
        ...

    def sleep(self, seconds: float) -> None:
        """Pause the calling thread."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        time.sleep(max(0.0, seconds))
