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

The resumes themselves take turns too: a few at a time, in the order claimed. Sharing the
interpreter among all of them would finish every one late; one after another, most finish
early (two at a time keeps one replaying while the other waits for the database).
"""

from __future__ import annotations

import threading
from collections import deque
from datetime import timedelta

DEFAULT_MAX_WAIT = timedelta(seconds=1)
"""The longest a step waits for resumes in progress, or a resume for its turn: a steady
stream of them delays the runs already going, but never stops them."""
RESUMING_AT_ONCE = 2
"""How many runs replay their journal to their first live step at the same time."""


class ResumeFirst:
    """Counts the runs of one worker still getting to their first live step, and lets them
    replay a few at a time, first come first served."""

    def __init__(
        self, max_wait: timedelta = DEFAULT_MAX_WAIT, at_once: int = RESUMING_AT_ONCE
    ) -> None:
        if at_once < 1:
            raise ValueError("at_once must be at least 1")
        self._max_wait = max_wait.total_seconds()
        self._at_once = at_once
        self._changed = threading.Condition(threading.Lock())
        self._resuming = 0
        self._replaying = 0
        self._queue: deque[threading.Event] = deque()
        self._waiting = 0
        self._open = False

    @property
    def waiting(self) -> int:
        """How many steps are waiting their turn now."""
        with self._changed:
            return self._waiting

    @property
    def queued(self) -> int:
        """How many resumes are waiting for their turn to replay now."""
        with self._changed:
            return len(self._queue)

    def resuming(self) -> Resuming:
        """Count one more run getting to its first live step, until ``Resuming.done()``."""
        with self._changed:
            self._resuming += 1
        return Resuming(self)

    def wait_turn(self) -> None:
        """Wait (at most ``max_wait``) until no run is getting to its first live step."""
        if self._open or not self._resuming:  # every step asks: most need not take the lock
            return
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
            while self._queue:
                self._replaying += 1
                self._queue.popleft().set()
            self._changed.notify_all()

    def _replay_turn(self) -> None:
        """Wait (at most ``max_wait``) until fewer than ``at_once`` runs replay, after the
        runs that asked before; then count this one among them."""
        with self._changed:
            if self._open or (self._replaying < self._at_once and not self._queue):
                self._replaying += 1
                return
            turn = threading.Event()
            self._queue.append(turn)
        if turn.wait(self._max_wait):
            return  # the replay that ended handed its place over
        with self._changed:
            if turn in self._queue:  # waited long enough: replay beside the others
                self._queue.remove(turn)
                self._replaying += 1

    def _done(self, replayed: bool) -> None:
        with self._changed:
            self._resuming -= 1
            if replayed and self._queue:
                self._queue.popleft().set()  # the place goes to the next in line
            elif replayed:
                self._replaying -= 1
            if not self._resuming:
                self._changed.notify_all()


class Resuming:
    """One run of a worker on its way to its first live step."""

    def __init__(self, turns: ResumeFirst) -> None:
        self._turns = turns
        self._counted = True
        self._replaying = False

    def replay_turn(self) -> None:
        """Wait for this run's turn to replay its journal (see ``ResumeFirst``)."""
        if self._counted and not self._replaying:
            self._turns._replay_turn()
            self._replaying = True

    def done(self) -> None:
        """The run has got to its first live step (or ended): stop holding the others back
        (idempotent)."""
        if self._counted:
            self._counted = False
            self._turns._done(self._replaying)

    def wait_turn(self) -> None:
        """Before a later live step: let the worker's other resumes get to their first."""
        self.done()
        self._turns.wait_turn()
