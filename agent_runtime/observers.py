"""Step observers: told of each journal entry and each run's end once it is committed.

A ``Notifier`` is asked *before* a change and its notices are committed with it. An
observer hears of a change only *after* it is durable, so what it sees has happened
for good; what it does is no part of the run. It must return quickly (hand work to a
thread of its own), and whatever it raises is logged and ignored: an observer can
neither fail nor stop a run. Live trace exporters are observers.
"""

from __future__ import annotations

import logging
from typing import Protocol

from agent_runtime.records import Run, StepRecord

logger = logging.getLogger(__name__)


class StepObserver(Protocol):
    """Watches committed journal entries and run endings, on the thread that committed them."""

    def step_committed(self, run: Run, step: StepRecord) -> None:
        """``step`` was appended to the journal of ``run`` (``run`` as claimed)."""
        ...

    def run_ended(self, run: Run) -> None:
        """``run`` completed, failed or was cancelled; ``run`` shows its final state."""
        ...


class Guarded:
    """Passes each call on to an observer, logging and swallowing whatever it raises."""

    def __init__(self, observer: StepObserver) -> None:
        self._observer = observer

    def step_committed(self, run: Run, step: StepRecord) -> None:
        """Tell the observer about a committed entry."""
        try:
            self._observer.step_committed(run, step)
        except Exception:
            logger.warning(
                "step observer failed",
                exc_info=True,
                extra={"action": "observe", "run_id": run.id, "step": step.position},
            )

    def run_ended(self, run: Run) -> None:
        """Tell the observer that a run ended."""
        try:
            self._observer.run_ended(run)
        except Exception:
            logger.warning(
                "step observer failed", exc_info=True, extra={"action": "observe", "run_id": run.id}
            )


def guard(observer: StepObserver | None) -> Guarded | None:
    """Return ``observer`` guarded (None stays None; a guarded one is not wrapped again)."""
    if observer is None or isinstance(observer, Guarded):
        return observer
    return Guarded(observer)


class Several:
    """Passes each call on to several observers, in order, each guarded."""

    def __init__(self, *observers: StepObserver) -> None:
        self._observers = tuple(Guarded(o) for o in observers)

    def step_committed(self, run: Run, step: StepRecord) -> None:
        """Tell each observer about a committed entry."""
        for observer in self._observers:
            observer.step_committed(run, step)

    def run_ended(self, run: Run) -> None:
        """Tell each observer that a run ended."""
        for observer in self._observers:
            observer.run_ended(run)


def combined(*observers: StepObserver | None) -> StepObserver | None:
    """Return one observer telling each of ``observers`` (None when there is none)."""
    present = [o for o in observers if o is not None]
    if len(present) <= 1:
        return present[0] if present else None
    return Several(*present)
