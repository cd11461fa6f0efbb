"""The step observer hook on the shipped fakes: told after each commit, never in the way."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from agent_runtime import (
    NO_RETRY,
    Run,
    RunContext,
    RunStatus,
    Runtime,
    StepRecord,
    WaitTimedOut,
    WorkerOptions,
    Workflows,
    parse_run_id,
)
from agent_runtime.testing import FrozenClock, InMemoryStore

OPTIONS = WorkerOptions(owner="test", lease_ttl=timedelta(seconds=30))


class Recorder:
    """Notes what it is told, and whether the store already held each entry when told."""

    def __init__(self, store: InMemoryStore) -> None:
        self.store = store
        self.steps: list[tuple[int, str, bool]] = []
        self.ended: list[Run] = []

    def step_committed(self, run: Run, step: StepRecord) -> None:
        """Note the entry and whether it is in the stored journal."""
        self.steps.append((step.position, step.name, step in self.store.load_journal(run.id)))

    def run_ended(self, run: Run) -> None:
        """Note the run's final state."""
        self.ended.append(run)


class Broken:
    """An observer that fails whatever it is told."""

    def step_committed(self, run: Run, step: StepRecord) -> None:
        """Fail."""
        raise RuntimeError("observer broke")

    def run_ended(self, run: Run) -> None:
        """Fail."""
        raise RuntimeError("observer broke")


class Harness:
    """A runtime over the in-memory store, with an observer, a frozen clock and call counts.

    The workflow ``three`` reads the time, runs step ``a``, waits for ``go``, runs ``b``.
    """

    def __init__(self, *, broken: bool = False) -> None:
        self.clock = FrozenClock()
        self.store = InMemoryStore()
        self.workflows = Workflows()
        self.calls: Counter[str] = Counter()
        self.recorder = Recorder(self.store)
        observer = Broken() if broken else self.recorder
        self.runtime = Runtime(self.store, self.workflows, clock=self.clock, observer=observer)
        self.workflows.add("three", self._three)

    def effect(self, label: str) -> str:
        """A step body that counts its executions."""
        self.calls[label] += 1
        return label

    def work(self) -> int:
        """Let one worker claim and execute what is due now."""
        return self.runtime.worker(OPTIONS).run_once()

    def _three(self, ctx: RunContext, _: Any) -> list[str]:
        ctx.now()
        first = ctx.step(self.effect, "a", name="a")
        data = ctx.wait_for("go")
        return [first, ctx.step(self.effect, "b", name="b"), str(data)]


@pytest.fixture
def h() -> Harness:
    """A fresh harness with a recording observer."""
    return Harness()


def test_the_observer_sees_each_entry_once_committed_in_order(h: Harness) -> None:
    """Every entry reaches the observer in journal order, each already in the stored journal."""
    recorder = h.recorder
    run = h.runtime.start("three")
    h.work()
    h.runtime.signal(run.id, "go", 7)
    h.work()
    journal = h.store.load_journal(run.id)
    assert [s.name for s in journal] == ["now", "a", "go", "go", "b"]
    assert recorder.steps == [(s.position, s.name, True) for s in journal]


def test_the_observer_sees_the_end_as_stored(h: Harness) -> None:
    """A run woken by its wait's deadline ends, once, as stored: no lease, no wait key."""
    recorder = h.recorder

    def patient(ctx: RunContext, _: Any) -> str:
        try:
            return str(ctx.wait_for("go", timeout=timedelta(minutes=1)))
        except WaitTimedOut:
            return "gave up"

    h.workflows.add("patient", patient)
    run = h.runtime.start("patient")
    h.work()
    assert (h.runtime.get(run.id).wait_key, recorder.ended) == ("go", [])
    h.clock.advance(timedelta(minutes=2))
    h.work()
    assert recorder.ended == [h.runtime.get(run.id)]
    assert (recorder.ended[0].status, recorder.ended[0].wait_key) == (RunStatus.COMPLETED, None)


def test_a_failed_run_ends_for_the_observer_with_its_error(h: Harness) -> None:
    """A run whose step fails is told as failed, with the stored error, after the entry."""
    recorder = h.recorder

    def boom() -> None:
        raise ValueError("card declined")

    h.workflows.add("fails", lambda ctx, _: ctx.step(boom, name="charge", retry=NO_RETRY))
    run = h.runtime.start("fails")
    h.work()
    (ended,) = recorder.ended
    assert ended == h.runtime.get(run.id)
    assert ended.status == RunStatus.FAILED
    assert ended.error is not None
    assert ended.error.message.endswith("ValueError: card declined")
    assert recorder.steps == [(0, "charge", True)]


def test_a_waiting_run_cancelled_ends_once_for_the_observer(h: Harness) -> None:
    """Cancelling a run no worker holds tells the cancelling runtime's observer, once."""
    recorder = h.recorder
    run = h.runtime.start("three")
    h.work()
    cancelled = h.runtime.cancel(run.id)
    assert h.work() == 0
    assert recorder.ended == [cancelled]
    assert cancelled.status == RunStatus.CANCELLED


def test_a_running_run_cancelled_ends_once_through_its_worker(h: Harness) -> None:
    """A run cancelled mid-step is told ended once, by its worker; the refused entry is not."""
    recorder = h.recorder

    def cancel_me(run_id: str) -> str:
        h.runtime.cancel(parse_run_id(run_id))
        return "too late"

    h.workflows.add("cancelled", lambda ctx, _: ctx.step(cancel_me, ctx.run_id, name="cancel"))
    run = h.runtime.start("cancelled")
    h.work()
    assert recorder.ended == [h.runtime.get(run.id)]
    assert recorder.ended[0].status == RunStatus.CANCELLED
    assert recorder.steps == []


def test_an_observer_that_raises_does_not_disturb_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failing observer is logged per call and ignored: the run completes, steps run once."""
    h = Harness(broken=True)
    run = h.runtime.start("three")
    with caplog.at_level(logging.WARNING, logger="agent_runtime.observers"):
        h.work()
        h.runtime.signal(run.id, "go")
        h.work()
    done = h.runtime.get(run.id)
    assert (done.status, done.output) == (RunStatus.COMPLETED, ["a", "b", "None"])
    assert h.calls == Counter({"a": 1, "b": 1})
    failures = [r for r in caplog.records if r.getMessage() == "step observer failed"]
    assert len(failures) == len(h.store.load_journal(run.id)) + 1
    assert all(r.exc_info is not None for r in failures)
