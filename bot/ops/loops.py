"""The background loops of a process (worker, dispatcher, scheduler jobs) and when each last
went round: a loop that stops going round is stuck, whatever its thread says."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class Loop:
    """A loop expected to go round every ``every``; ``last_tick`` is when it last did
    (``time.monotonic()``)."""

    name: str
    every: timedelta
    last_tick: Callable[[], float]


class Loops:
    """The loops this process runs, by name."""

    def __init__(self) -> None:
        self._loops: dict[str, Loop] = {}
        self._ticks: dict[str, float] = {}
        self._lock = threading.Lock()

    def watch(self, name: str, every: timedelta, last_tick: Callable[[], float]) -> None:
        """Watch a loop that keeps its own time of last tick."""
        with self._lock:
            self._loops[name] = Loop(name, every, last_tick)

    def add(self, name: str, every: timedelta) -> None:
        """Watch a loop that reports each round with ``tick(name)``; it counts as ticking now."""
        self._ticks[name] = time.monotonic()
        self.watch(name, every, lambda: self._ticks[name])

    def tick(self, name: str) -> None:
        """Record that the loop ``name`` (added with ``add``) went round just now."""
        self._ticks[name] = time.monotonic()

    def stalled(self, grace: timedelta) -> dict[str, float]:
        """Return the loops silent for longer than their interval plus ``grace``, with the
        seconds since each last went round."""
        now = time.monotonic()
        silent = {loop.name: (now - loop.last_tick(), loop.every) for loop in self._all()}
        return {
            name: round(age, 3)
            for name, (age, every) in silent.items()
            if age > (every + grace).total_seconds()
        }

    def last_ticks(self) -> dict[str, float]:
        """Return when each loop last went round, as Unix time."""
        offset = time.time() - time.monotonic()
        return {loop.name: loop.last_tick() + offset for loop in self._all()}

    def _all(self) -> list[Loop]:
        with self._lock:
            return list(self._loops.values())
