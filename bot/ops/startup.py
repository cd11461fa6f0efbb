"""Starting before the database: a long-running process keeps trying to reach it, for a while.

An orchestrator often starts ``signoff serve`` or ``signoff worker`` beside the database,
or the database restarts as they start. Rather than exit at once (and be restarted in a
loop), the process tries again with backoff for ``SIGNOFF_STARTUP_DB_WAIT_SECONDS``,
logging each failed attempt with the database's address (its password masked), then gives
up with one clear error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from agent_runtime import StoreUnavailable

T = TypeVar("T")

logger = logging.getLogger(__name__)

FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 5.0


def masked(url: str) -> str:
    """Return the database URL with its password masked."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "(the configured database URL)"


def when_reachable(
    open_database: Callable[[], T],
    *,
    url: str,
    wait: timedelta,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Return what ``open_database`` returns, calling it again while it raises
    ``StoreUnavailable`` (backoff from 0.5 s, doubling up to 5 s) for up to ``wait``; then
    raise ``StoreUnavailable`` saying how long it tried and what the database last said."""
    deadline = clock() + wait.total_seconds()
    backoff = FIRST_BACKOFF_S
    attempt = 1
    while True:
        try:
            return open_database()
        except StoreUnavailable as exc:
            left = deadline - clock()
            if left <= 0:
                raise StoreUnavailable(
                    f"the database at {masked(url)} could not be reached within "
                    f"{wait.total_seconds():g} s (SIGNOFF_STARTUP_DB_WAIT_SECONDS): {exc}"
                ) from exc
            pause = min(backoff, left)
            logger.warning(
                "database unreachable at start (attempt %d, %s): %s; trying again in %.1f s",
                attempt,
                masked(url),
                exc,
                pause,
                extra={"action": "startup"},
            )
            sleep(pause)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            attempt += 1
