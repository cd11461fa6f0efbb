"""Starting before the database: a long-running process keeps trying to reach it, for a while.

An orchestrator often starts ``signoff serve`` or ``signoff worker`` beside the database,
or the database restarts as they start. Rather than exit at once (and be restarted in a
loop), the process tries again with backoff for ``SIGNOFF_STARTUP_DB_WAIT_SECONDS``,
logging each failed attempt with the database's address (its password masked), then gives
up with one clear error. Meanwhile ``Startup`` tells the probes how far it has got.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from agent_runtime import StoreUnavailable
from bot.ops.health import OK, STARTING, Report
from store import masked_url

T = TypeVar("T")

logger = logging.getLogger(__name__)

FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 5.0


class Startup:
    """How far a starting process has got in reaching its database: what the probes and the
    metrics report until it is up. Only the error's class is kept (its message may name a
    host or a user)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._error: str | None = None
        self._deadline: float | None = None
        self._reached = False
        self._up = False

    @property
    def up(self) -> bool:
        """Tell whether the process is up: its database reached, its own app serving."""
        return self._up

    @property
    def failures(self) -> int:
        """Return how many attempts to reach the database have failed."""
        return self._failures

    def failed(self, exc: StoreUnavailable, left: float) -> None:
        """Record one failed attempt, ``left`` seconds before the process gives up."""
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        with self._lock:
            self._failures += 1
            self._error = type(cause).__name__
            self._deadline = self._clock() + max(0.0, left)

    def reached(self) -> None:
        """Record that the database answered (the process goes on starting its parts)."""
        self._reached = True

    def finished(self) -> None:
        """Record that the process is up."""
        self._up = True

    def liveness(self) -> Report:
        """Alive: the process is starting, as it should."""
        return Report({"startup": OK if self._up else STARTING})

    def readiness(self) -> Report:
        """Not ready until the database is reached; says what failed, how often, and how
        long the process keeps trying."""
        with self._lock:
            if self._up:
                return Report({"startup": OK})
            if self._reached:
                return Report({"database": OK, "startup": "starting its parts"})
            if self._error is None or self._deadline is None:
                return Report({"database": "connecting", "startup": "first attempt"})
            left = max(0.0, self._deadline - self._clock())
            return Report(
                {
                    "database": f"unreachable ({self._error})",
                    "startup": f"{self._failures} attempts failed, giving up in {left:.1f} s",
                }
            )


def when_reachable(
    open_database: Callable[[], T],
    *,
    url: str,
    wait: timedelta,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    startup: Startup | None = None,
) -> T:
    """Return what ``open_database`` returns, calling it again while it raises
    ``StoreUnavailable`` (backoff from 0.5 s, doubling up to 5 s) for up to ``wait``; then
    raise ``StoreUnavailable`` saying how long it tried and what the database last said.
    Each failure and the success are reported to ``startup``, if given."""
    progress = startup or Startup(clock)
    deadline = clock() + wait.total_seconds()
    backoff = FIRST_BACKOFF_S
    attempt = 1
    while True:
        try:
            opened = open_database()
        except StoreUnavailable as exc:
            left = deadline - clock()
            progress.failed(exc, left)
            if left <= 0:
                raise StoreUnavailable(
                    f"the database at {masked_url(url)} could not be reached within "
                    f"{wait.total_seconds():g} s (SIGNOFF_STARTUP_DB_WAIT_SECONDS): {exc}"
                ) from exc
            pause = min(backoff, left)
            logger.warning(
                "database unreachable at start (attempt %d, %s): %s; trying again in %.1f s",
                attempt,
                masked_url(url),
                exc,
                pause,
                extra={"action": "startup"},
            )
            sleep(pause)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            attempt += 1
        else:
            progress.reached()
            return opened
