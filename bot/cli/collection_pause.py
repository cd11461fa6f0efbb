"""Python's automatic garbage collection, paused while a short ``signoff`` command runs.

Starting a command allocates some 50,000 objects that live as long as the process (the
modules, classes and functions of SQLAlchemy, the runtime and the store), and Python's
automatic collection traverses each of them again as it ages: about 30 ms of ``signoff
approve`` that reclaims nothing. A command that does one thing and exits (``ONE_SHOT``) runs
with automatic collection off, as its process ends before garbage could matter; any other
command (``serve``, ``worker``, ``eval``, ``import``...) gets it back, as it was, once the
command line is parsed and before the command runs, so it collects as it always did.

A one-shot command gets it back when it returns, unless it is the process's own command line
(the ``signoff`` script), which exits next (as it does after ``--help`` or a usage error):
there, giving it back would only make Python traverse every object once more on the way
out (another 30 ms), to free nothing the exit does not free.
"""

from __future__ import annotations

import gc

ONE_SHOT = frozenset(
    {
        *("start", "runs", "show", "cancel", "resume", "signal"),
        *("run", "approvals", "approve", "reject", "edit", "raise-budget"),
    }
)
"""The commands that read or change a bounded amount (one run, one decision, one page) and
exit: they run with automatic collection off."""


class CollectionPause:
    """Automatic collection off from entering the block until ``end()`` or the block's end,
    whichever comes first; then as it was before (still off if it was off). With
    ``process_exits`` (the process exits after the block), only ``end()`` gives it back."""

    def __init__(self, *, process_exits: bool = False) -> None:
        self._process_exits = process_exits
        self._was_enabled = False
        self._paused = False

    def __enter__(self) -> CollectionPause:
        self._was_enabled = gc.isenabled()
        self._paused = True
        gc.disable()
        return self

    def end(self) -> None:
        """Give automatic collection back now (nothing, if it was given back already)."""
        if self._paused:
            self._paused = False
            if self._was_enabled:
                gc.enable()

    def end_unless_one_shot(self, command: str | None) -> None:
        """Give automatic collection back unless ``command`` is one of ``ONE_SHOT``."""
        if command not in ONE_SHOT:
            self.end()

    def __exit__(self, *raised: object) -> None:
        if not self._process_exits:
            self.end()
