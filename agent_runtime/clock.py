"""Where the runtime reads the time and sleeps; swapped for a frozen clock in tests."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """The time source of the runtime."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware in UTC."""
        ...

    def sleep(self, seconds: float) -> None:
        """Pause the calling thread."""
        ...

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait until ``event`` is set or ``seconds`` pass; tell whether it was set."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)

    def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        time.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait for real."""
        return event.wait(max(0.0, seconds))


class FrozenClock:
    """A clock that moves only when told to; ``sleep`` advances it instantly."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """Return the frozen time."""
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        """Advance the clock instead of sleeping."""
        self.advance(timedelta(seconds=seconds))

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Return at once: True if ``event`` is set, else after advancing the clock."""
        if event.is_set():
            return True
        self.sleep(max(0.0, seconds))
        return False

    def advance(self, delta: timedelta) -> None:
        """Move the clock forward by ``delta``."""
        with self._lock:
            self._now += delta
