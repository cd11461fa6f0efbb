"""Ends a process whose background loop is stuck, so that its orchestrator restarts it.

A stuck loop cannot be stopped politely (it does not come round to notice), so the
watchdog logs which loops are stuck and exits at once with ``EXIT_STALLED``; leases the
process held lapse and other workers take its runs over.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import timedelta

from bot.ops.loops import Loops

logger = logging.getLogger(__name__)

EXIT_STALLED = 3
"""The exit status of a process ended because one of its loops stopped going round."""

CHECK_EVERY = timedelta(milliseconds=500)


class Watchdog:
    """Checks the loops on a thread of its own; exits the process once one is stalled."""

    def __init__(
        self, loops: Loops, exit_after: timedelta, exit: Callable[[int], object] = os._exit
    ) -> None:
        self._loops = loops
        self._exit_after = exit_after
        self._exit = exit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="signoff-watchdog", daemon=True)

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (a process shutting down may take its loops down first)."""
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(CHECK_EVERY.total_seconds()):
            stalled = self._loops.stalled(self._exit_after)
            if stalled and not self._stop.is_set():
                logger.critical(
                    "loops stopped going round; exiting",
                    extra={"action": "watchdog", "stalled": stalled},
                )
                _flush_logs()
                self._exit(EXIT_STALLED)
                return


def _flush_logs() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
