"""Resumes first: a worker's runs past their first live step give way to the runs it is
resuming, on real threads over the in-memory store."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from agent_runtime import (
    RunContext,
    RunId,
    RunStatus,
    Runtime,
    StepRecord,
    WorkerOptions,
    Workflows,
)
from agent_runtime.resume_first import ResumeFirst
from agent_runtime.testing import InMemoryStore

WAIT_S = 10.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; fail after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def waiter(turns: ResumeFirst) -> tuple[threading.Thread, threading.Event]:
    """A started thread that waits its turn, and the event it sets once through."""
    passed = threading.Event()

    def wait() -> None:
        turns.wait_turn()
        passed.set()

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, passed


class HeldJournals(InMemoryStore):
    """Holds the journal read of the runs named in ``held`` until ``let_go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.held: set[RunId] = set()
        self.loading = threading.Event()
        self.let_go = threading.Event()

    def load_journal(self, run_id: RunId) -> list[StepRecord]:
        """Read the journal, after ``let_go`` for a held run."""
        if run_id in self.held:
            self.loading.set()
            assert self.let_go.wait(WAIT_S), "the journal read was never released"
        return super().load_journal(run_id)


def test_a_later_step_waits_while_another_run_resumes() -> None:
    """A run's second live step waits until a run being resumed has recorded its first."""
    store, log = HeldJournals(), []
    workflows = Workflows()

    def going(ctx: RunContext, _: Any) -> None:
        ctx.step(lambda: store.loading.wait(WAIT_S), name="first")
        ctx.step(lambda: log.append("going: second step"), name="second")

    def waiting(ctx: RunContext, _: Any) -> None:
        ctx.wait_for("go")
        ctx.step(lambda: log.append("resumed: next step"), name="next")

    workflows.add("going", going)
    workflows.add("waiting", waiting)
    runtime = Runtime(store, workflows)
    resumed = runtime.start("waiting")
    worker = runtime.worker(WorkerOptions(concurrency=2, poll_interval=timedelta(milliseconds=5)))
    assert worker.run_once() == 1
    assert runtime.get(resumed.id).status is RunStatus.WAITING
    store.held.add(resumed.id)
    runtime.signal(resumed.id, "go")
    going_run = runtime.start("going")
    thread = threading.Thread(target=worker.run, kwargs={"until_idle": True})
    thread.start()
    wait_until(lambda: worker.turns.waiting == 1, "the going run's second step to wait")
    assert log == []
    log.append("resumed run released")
    store.let_go.set()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert log.index("resumed run released") < log.index("going: second step")
    assert runtime.get(going_run.id).status is RunStatus.COMPLETED
    assert runtime.get(resumed.id).status is RunStatus.COMPLETED


def test_a_step_waits_no_longer_than_the_limit() -> None:
    """However long a resume takes, a later step waits at most ``max_wait``, then goes on."""
    turns = ResumeFirst(max_wait=timedelta(milliseconds=20))
    turns.resuming()  # never done
    thread, passed = waiter(turns)
    assert passed.wait(WAIT_S)
    thread.join(WAIT_S)


def test_a_stopping_worker_holds_nothing_back() -> None:
    """``open()`` (the worker stopping) frees every step waiting its turn at once."""
    turns = ResumeFirst(max_wait=timedelta(seconds=WAIT_S * 10))
    resuming = turns.resuming()
    thread, passed = waiter(turns)
    wait_until(lambda: turns.waiting == 1, "the step to wait")
    turns.open()
    assert passed.wait(WAIT_S)
    thread.join(WAIT_S)
    resuming.done()
    resuming.done()  # idempotent: the count does not go below zero
    turns.wait_turn()  # nobody resuming: returns at once


def test_a_lone_run_never_waits() -> None:
    """With no other run resuming, a run's later steps do not wait at all."""
    turns = ResumeFirst(max_wait=timedelta(seconds=WAIT_S * 10))
    resuming = turns.resuming()
    resuming.wait_turn()  # its own resume is over once it takes a later step
    assert turns.waiting == 0


def test_resumes_replay_a_few_at_a_time_in_the_order_they_came() -> None:
    """With one replay at a time, each resume replays once the one before has got to its
    first live step, in the order they asked."""
    turns = ResumeFirst(max_wait=timedelta(seconds=WAIT_S * 10), at_once=1)
    first = turns.resuming()
    first.replay_turn()
    log: list[str] = []
    finish = {name: threading.Event() for name in ("second", "third")}

    def resume(name: str) -> None:
        resuming = turns.resuming()
        resuming.replay_turn()
        log.append(name)
        assert finish[name].wait(WAIT_S)
        resuming.done()

    threads = [threading.Thread(target=resume, args=(name,)) for name in ("second", "third")]
    for queued, thread in enumerate(threads, start=1):
        thread.start()
        wait_until(lambda: turns.queued == queued, f"resume {queued} to queue")  # noqa: B023
    assert log == []
    first.done()
    wait_until(lambda: log == ["second"], "the second resume to replay")
    assert turns.queued == 1
    finish["second"].set()
    wait_until(lambda: log == ["second", "third"], "the third resume to replay")
    finish["third"].set()
    for thread in threads:
        thread.join(WAIT_S)
    assert turns.queued == 0
