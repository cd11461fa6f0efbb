"""Group commit: callers waiting at the same time are carried out in one batch."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import pytest

from store.group_commit import GroupCommit

WAIT_S = 30


def wait_for(condition: Callable[[], bool]) -> None:
    """Wait until ``condition`` holds (failing after a generous timeout)."""
    done = threading.Event()
    for _ in range(WAIT_S * 200):
        if condition():
            return
        done.wait(0.005)
    raise AssertionError("condition never held")


class Recorder:
    """A batch function that records its batches; the first batch waits for ``release``."""

    def __init__(self, fail: set[int] | None = None) -> None:
        self.batches: list[list[int]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        self.fail = fail or set()

    def __call__(self, items: Sequence[int]) -> list[int | BaseException]:
        self.batches.append(list(items))
        if len(self.batches) == 1:
            self.started.set()
            assert self.release.wait(WAIT_S)
        return [ValueError(f"bad {i}") if i in self.fail else i * 10 for i in items]


def call_all(group: GroupCommit[int, int], items: Sequence[int]) -> dict[int, object]:
    """Call ``group`` with each item from its own thread; return each item's outcome."""
    outcomes: dict[int, object] = {}

    def call(item: int) -> None:
        try:
            outcomes[item] = group(item)
        except Exception as error:
            outcomes[item] = error

    threads = [threading.Thread(target=call, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    return outcomes


def test_a_lone_caller_runs_at_once_alone() -> None:
    """With nobody else waiting, a call is carried out at once, in a batch of its own."""
    batches: list[list[int]] = []

    def carry_out(items: Sequence[int]) -> list[int | BaseException]:
        batches.append(list(items))
        return [item + 1 for item in items]

    group = GroupCommit(carry_out)
    assert group(1) == 2
    assert group(2) == 3
    assert batches == [[1], [2]]


def test_callers_waiting_during_a_batch_go_together_in_the_next() -> None:
    """Callers arriving while a batch runs wait, then are carried out together, in order."""
    recorder = Recorder()
    group = GroupCommit(recorder)
    first = threading.Thread(target=group, args=(0,))
    first.start()
    assert recorder.started.wait(WAIT_S)
    results: dict[int, object] = {}
    callers = threading.Thread(target=lambda: results.update(call_all(group, [1, 2, 3, 4])))
    callers.start()
    wait_for(lambda: group.waiting == 4)
    recorder.release.set()
    callers.join(WAIT_S)
    first.join(WAIT_S)
    assert recorder.batches[0] == [0]
    assert sorted(recorder.batches[1]) == [1, 2, 3, 4]
    assert results == {1: 10, 2: 20, 3: 30, 4: 40}


def test_a_batch_holds_at_most_most_items() -> None:
    """No batch is larger than ``most``; the rest go in the batches after it."""
    recorder = Recorder()
    group = GroupCommit(recorder, most=2)
    first = threading.Thread(target=group, args=(0,))
    first.start()
    assert recorder.started.wait(WAIT_S)
    results: dict[int, object] = {}
    callers = threading.Thread(target=lambda: results.update(call_all(group, [1, 2, 3, 4, 5])))
    callers.start()
    wait_for(lambda: group.waiting == 5)
    recorder.release.set()
    callers.join(WAIT_S)
    first.join(WAIT_S)
    assert [len(batch) for batch in recorder.batches] == [1, 2, 2, 1]
    assert results == {i: i * 10 for i in range(1, 6)}


def test_an_item_error_reaches_its_caller_only() -> None:
    """An exception returned for one item is raised to that caller; the others get results."""
    recorder = Recorder(fail={2})
    group = GroupCommit(recorder)
    first = threading.Thread(target=group, args=(0,))
    first.start()
    assert recorder.started.wait(WAIT_S)
    results: dict[int, object] = {}
    callers = threading.Thread(target=lambda: results.update(call_all(group, [1, 2, 3])))
    callers.start()
    wait_for(lambda: group.waiting == 3)
    recorder.release.set()
    callers.join(WAIT_S)
    first.join(WAIT_S)
    assert (results[1], results[3]) == (10, 30)
    assert isinstance(results[2], ValueError)
    assert str(results[2]) == "bad 2"


def test_a_failed_batch_fails_its_callers_and_not_the_next() -> None:
    """If the batch function raises, every caller of that batch gets the error; the next
    batch runs as usual."""
    calls: list[list[int]] = []

    def carry_out(items: Sequence[int]) -> list[int | BaseException]:
        calls.append(list(items))
        if len(calls) == 1:
            raise RuntimeError("database gone")
        return list(items)

    group = GroupCommit(carry_out)
    with pytest.raises(RuntimeError, match="database gone"):
        group(1)
    assert group(2) == 2


def test_a_wrong_number_of_results_is_an_error() -> None:
    """A batch function that answers for fewer items than it was given fails the batch."""
    group: GroupCommit[int, int] = GroupCommit(lambda items: [])
    with pytest.raises(RuntimeError, match="0 results for 1 items"):
        group(1)


def test_a_batch_needs_room_for_an_item() -> None:
    """``most`` below one is refused."""
    with pytest.raises(ValueError, match="at least one item"):
        GroupCommit(lambda items: list(items), most=0)


class Abort(BaseException):
    """Not an ``Exception``: what a batch function might raise past ``except Exception``."""


def test_a_batch_ending_in_a_base_exception_still_hands_on_the_lead() -> None:
    """A batch function that raises a ``BaseException`` fails its own callers only: the
    callers waiting meanwhile are carried out in the next batch, and later callers too."""
    release, started = threading.Event(), threading.Event()

    def carry_out(items: Sequence[int]) -> list[int | BaseException]:
        if items[0] == 0:
            started.set()
            assert release.wait(WAIT_S)
            raise Abort("the lead's batch ended")
        return [item * 10 for item in items]

    group = GroupCommit(carry_out)
    failed: list[BaseException] = []

    def lead() -> None:
        try:
            group(0)
        except Abort as error:
            failed.append(error)

    first = threading.Thread(target=lead)
    first.start()
    assert started.wait(WAIT_S)
    results: dict[int, object] = {}
    callers = threading.Thread(target=lambda: results.update(call_all(group, [1, 2])))
    callers.start()
    wait_for(lambda: group.waiting == 2)
    release.set()
    callers.join(WAIT_S)
    first.join(WAIT_S)
    assert [str(error) for error in failed] == ["the lead's batch ended"]
    assert results == {1: 10, 2: 20}
    assert group(3) == 30
