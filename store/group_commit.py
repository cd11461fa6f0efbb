"""Group commit: concurrent callers' items carried out together, one batch at a time.

A caller that finds no batch running leads: it takes every item waiting (its own first),
carries them out with one call of the batch function, hands each caller its result, and
passes the lead to the first caller still waiting, if any. A lone caller therefore runs at
once, alone; callers that arrive while a batch runs wait for it and then go in the next
batch together.

With ``gather``, a leader first waits, at most that long, until as many callers wait as
the batch before it held: callers that loop (a pool of deciders) come back from a batch
together, and the first one back would otherwise go alone while the rest gather behind
it. After a lone caller's batch nobody waits.

One batch at a time: on a shared machine, two concurrent batches of decisions were slower
than one (they contend for the same audit chains' heads, and for the interpreter).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(eq=False)
class _Slot(Generic[Item, Result]):
    item: Item
    ready: threading.Event = field(default_factory=threading.Event)
    finished: bool = False
    result: Result | None = None
    error: BaseException | None = None

    def outcome(self) -> Result:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set with finished


class GroupCommit(Generic[Item, Result]):
    """Calls ``carry_out`` with the items of callers waiting at the same time (at most
    ``most`` at once), in arrival order; it returns one outcome per item, in their order: a
    result, or an exception that is raised to that item's caller alone.

    If ``carry_out`` raises, every caller of that batch gets the error.
    """

    def __init__(
        self,
        carry_out: Callable[[Sequence[Item]], Sequence[Result | BaseException]],
        *,
        most: int = 64,
        gather: float = 0.0,
    ) -> None:
        if most < 1:
            raise ValueError("a batch holds at least one item")
        self._carry_out = carry_out
        self._most = most
        self._gather = gather
        self._last = 1
        self._arrived = threading.Condition()
        self._lock = threading.Lock()
        self._waiting: deque[_Slot[Item, Result]] = deque()
        self._running = False
        self.batches = 0
        """How many batches were carried out (for measurements)."""
        self.items = 0
        """How many items they held."""

    @property
    def waiting(self) -> int:
        """How many callers wait for a batch to take their items."""
        with self._lock:
            return len(self._waiting)

    def __call__(self, item: Item) -> Result:
        """Carry out ``item`` (with others waiting now) and return its result."""
        slot: _Slot[Item, Result] = _Slot(item)
        with self._lock:
            self._waiting.append(slot)
            leads = not self._running
            self._running = True
        if self._gather:
            with self._arrived:
                self._arrived.notify()
        if not leads:
            slot.ready.wait()
            if slot.finished:
                return slot.outcome()
        self._lead()
        return slot.outcome()

    def _lead(self) -> None:
        if self._gather:
            self._gather_callers()
        with self._lock:
            batch = [self._waiting.popleft() for _ in range(min(self._most, len(self._waiting)))]
            self.batches += 1
            self.items += len(batch)
            self._last = len(batch)
        try:
            results = self._carry_out([slot.item for slot in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"{len(results)} results for {len(batch)} items")
        except BaseException as error:  # every caller of the batch learns why
            for slot in batch:
                slot.error = error
        else:
            for slot, result in zip(batch, results, strict=True):
                if isinstance(result, BaseException):
                    slot.error = result
                else:
                    slot.result = result
        with self._lock:
            following = self._waiting[0] if self._waiting else None
            self._running = following is not None
        for slot in batch:
            slot.finished = True
            slot.ready.set()
        if following is not None:
            following.ready.set()

    def _gather_callers(self) -> None:
        """Wait (at most ``gather``) until as many callers wait as the last batch held."""
        wanted = min(self._last, self._most)
        deadline = time.monotonic() + self._gather
        with self._arrived:
            while self.waiting < wanted:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._arrived.wait(left)
