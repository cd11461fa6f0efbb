"""Resumes first: a worker's runs past their first live step give way to the runs it has
just claimed until those reach theirs.

A run that a decision or an event has just made due is claimed, its journal loaded and
replayed, and its first live step taken — typically recording the decision it waited for.
Under a burst of wake-ups, that work competed for the processor (and, in CPython, for the
one interpreter lock) with the later steps of the runs resumed a moment before: a tool
call, a model call, the next approval's notices. Each resume then waited behind the whole
continuation of the runs ahead of it. Here the later steps wait, at a step boundary and
for at most ``max_wait``, while some run of the same worker is still getting to its first
live step; a run's first live step itself never waits, so a lone run is never slowed.
"""

from __future__ import annotations

import threading
from datetime import timedelta

DEFAULT_MAX_WAIT = timedelta(seconds=1)
"""The longest a step waits for resumes in progress: a steady stream of them delays the runs
already going, but never stops them."""


class ResumeFirst:
    """Counts the runs of one worker still getting to their first live step."""

    def __init__(self, max_wait: timedelta = DEFAULT_MAX_WAIT) -> None:
        self._max_wait = max_wait.total_seconds()
        self._changed = threading.Condition(threading.Lock())
        self._resuming = 0
        self._waiting = 0
        self._open = False

    @property
    def waiting(self) -> int:
        """How many steps are waiting their turn now."""
        with self._changed:
            return self._waiting

    def resuming(self) -> Resuming:
        """Count one more run getting to its first live step, until ``Resuming.done()``."""
        with self._changed:
            self._resuming += 1
        return Resuming(self)

    def wait_turn(self) -> None:
        """Wait (at most ``max_wait``) until no run is getting to its first live step."""
        with self._changed:
            self._waiting += 1
            try:
                self._changed.wait_for(lambda: self._open or not self._resuming, self._max_wait)
            finally:
                self._waiting -= 1

    def open(self) -> None:
        """Stop holding anything back (the worker is stopping)."""
        with self._changed:
            self._open = True
            self._changed.notify_all()

    def _done(self) -> None:
        with self._changed:
            self._resuming -= 1
            if not self._resuming:
                self._changed.notify_all()


class Resuming:
    """One run of a worker on its way to its first live step."""

    def __init__(self, turns: ResumeFirst) -> None:
        self._turns = turns
        self._counted = True

    def done(self) -> None:
        """The run has got to its first live step (or ended): stop holding the others back
        (idempotent)."""
        if self._counted:
            self._counted = False
            self._turns._done()

    def wait_turn(self) -> None:
        """Before a later live step: let the worker's other resumes get to their first."""
        self.done()
        self._turns.wait_turn()
