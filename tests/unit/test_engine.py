"""The engine on the shipped fakes: replay, retries, waits, non-determinism, cancel, stop."""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from agent_runtime import (
    NO_RETRY,
    RetryPolicy,
    RunContext,
    RunId,
    RunStatus,
    Runtime,
    StepFailed,
    StepKind,
    WaitTimedOut,
    WorkerOptions,
    Workflows,
)
from agent_runtime.testing import FrozenClock, InMemoryStore

FAST = RetryPolicy(max_attempts=3, initial_interval=timedelta(0))
OPTIONS = WorkerOptions(owner="test", lease_ttl=timedelta(seconds=30))


class Crash(BaseException):
    """Stands for the process dying: nothing in the engine may catch it."""


class Harness:
    """A runtime over the in-memory store with a frozen clock and call counters."""

    def __init__(self) -> None:
        self.clock = FrozenClock()
        self.store = InMemoryStore()
        self.workflows = Workflows()
        self.calls: Counter[str] = Counter()
        self.runtime = Runtime(self.store, self.workflows, clock=self.clock)

    def effect(self, label: str) -> str:
        """A step body that counts its executions."""
        self.calls[label] += 1
        return label

    def work(self) -> int:
        """Let one worker claim and execute what is due now."""
        return self.runtime.worker(OPTIONS).run_once()

    def status(self, run_id: RunId) -> RunStatus:
        return self.runtime.get(run_id).status


@pytest.fixture
def h() -> Harness:
    """A fresh harness."""
    return Harness()


def test_resume_answers_journaled_steps_without_running_them(h: Harness) -> None:
    """A run that crashed in step 4 resumes at step 4; steps 1-3 are never called again."""
    crash_once = {"armed": True}

    def flaky_fourth() -> str:
        if crash_once.pop("armed", False):
            raise Crash()
        return h.effect("s4")

    @h.workflows.register("wf")
    def wf(ctx: RunContext, _: Any) -> list[str]:
        done = [ctx.step(h.effect, f"s{i}", name=f"s{i}") for i in (1, 2, 3)]
        return [*done, ctx.step(flaky_fourth, name="s4")]

    run = h.runtime.start("wf")
    with pytest.raises(Crash):
        h.work()
    assert h.status(run.id) == RunStatus.RUNNING
    assert h.work() == 0  # the dead worker's lease has not expired yet
    h.clock.advance(OPTIONS.lease_ttl + timedelta(seconds=1))
    h.work()
    assert h.runtime.get(run.id).output == ["s1", "s2", "s3", "s4"]
    assert h.calls == Counter({"s1": 1, "s2": 1, "s3": 1, "s4": 1})


def test_replayed_values_match_live_ones(h: Harness) -> None:
    """now(), uuid() and step outputs read back from the journal exactly as first returned."""
    seen: list[Any] = []

    @h.workflows.register("wf")
    def wf(ctx: RunContext, _: Any) -> None:
        seen.append((ctx.now(), ctx.uuid(), ctx.step(lambda: (1, "a"), name="tuple")))
        ctx.wait_for("go")

    run = h.runtime.start("wf")
    h.work()
    h.clock.advance(timedelta(hours=1))
    h.runtime.signal(run.id, "go")
    h.work()
    assert h.status(run.id) == RunStatus.COMPLETED
    assert seen[0] == seen[1]
    assert seen[0][2] == [1, "a"]


def test_retries_are_journaled_and_succeed(h: Harness) -> None:
    """A step failing twice then succeeding records two failed attempts and one result."""
    failures = iter([ValueError("one"), ValueError("two")])

    def flaky() -> str:
        error = next(failures, None)
        if error:
            raise error
        return "ok"

    h.workflows.add("wf", lambda ctx, _: ctx.step(flaky, name="flaky", retry=FAST))
    run = h.runtime.start("wf")
    h.work()
    (step,) = h.runtime.journal(run.id)
    assert (step.output, step.attempts, h.runtime.get(run.id).output) == ("ok", 3, "ok")
    assert [a.error.message for a in h.runtime.attempts(run.id)] == ["one", "two"]


def test_backoff_grows_and_is_capped(h: Harness) -> None:
    """Pauses between attempts follow the backoff and never exceed max_interval."""
    policy = RetryPolicy(
        max_attempts=5,
        initial_interval=timedelta(seconds=1),
        backoff=3,
        max_interval=timedelta(seconds=5),
    )
    assert [policy.delay_after(n).total_seconds() for n in (1, 2, 3)] == [1, 3, 5]


def test_exhausted_step_fails_the_run_and_replays_its_failure(h: Harness) -> None:
    """A step out of attempts raises StepFailed, journaled so replay raises it without calling."""

    def always_fails() -> None:
        h.effect("fail")
        raise RuntimeError("nope")

    @h.workflows.register("wf")
    def wf(ctx: RunContext, _: Any) -> str:
        try:
            ctx.step(always_fails, name="bad", retry=FAST)
        except StepFailed as failure:
            ctx.wait_for("after")
            return failure.message
        return "unreachable"

    run = h.runtime.start("wf")
    h.work()
    h.runtime.signal(run.id, "after")
    h.work()
    assert h.runtime.get(run.id).output == "nope"
    assert h.calls["fail"] == 3


def test_non_retryable_error_fails_at_once(h: Harness) -> None:
    """An error listed as non-retryable ends the step after one attempt."""
    policy = RetryPolicy(max_attempts=5, initial_interval=timedelta(0), non_retryable=(KeyError,))

    def missing() -> None:
        h.effect("k")
        raise KeyError("x")

    h.workflows.add("wf", lambda ctx, _: ctx.step(missing, retry=policy))
    run = h.runtime.start("wf")
    h.work()
    failed = h.runtime.get(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None
    assert (failed.error.type, h.calls["k"]) == ("StepFailed", 1)


def test_step_timeout_counts_as_a_failed_attempt(h: Harness) -> None:
    """An attempt running past its timeout is abandoned and journaled as StepTimeout."""
    import threading

    release = threading.Event()
    h.workflows.add(
        "wf",
        lambda ctx, _: ctx.step(
            release.wait, 5, name="slow", retry=NO_RETRY, timeout=timedelta(milliseconds=20)
        ),
    )
    run = h.runtime.start("wf")
    h.work()
    release.set()
    (step,) = h.runtime.journal(run.id)
    assert step.error is not None
    assert step.error.type == "StepTimeout"


def test_unstorable_output_is_a_clear_step_failure(h: Harness) -> None:
    """A step returning a non-JSON value fails once with NotSerializable, not retried."""
    h.workflows.add("wf", lambda ctx, _: ctx.step(lambda: {1, 2}, name="set"))
    run = h.runtime.start("wf")
    h.work()
    (step,) = h.runtime.journal(run.id)
    assert step.error is not None
    assert step.attempts == 1
    assert (step.error.type, "cannot be stored as JSON" in step.error.message) == (
        "NotSerializable",
        True,
    )


def test_unstorable_input_fails_the_run_clearly(h: Harness) -> None:
    """Passing a non-JSON argument to a step fails the run naming the problem."""
    h.workflows.add("wf", lambda ctx, _: ctx.step(h.effect, object()))
    run = h.runtime.start("wf")
    h.work()
    failed = h.runtime.get(run.id)
    assert failed.error is not None
    assert failed.error.type == "NotSerializable"
    assert h.calls == Counter()


def test_durable_sleep_parks_the_run_until_its_time(h: Harness) -> None:
    """sleep() leaves the run waiting in the store; it resumes only once the time has come."""

    @h.workflows.register("wf")
    def wf(ctx: RunContext, _: Any) -> str:
        ctx.step(h.effect, "before", name="before")
        ctx.sleep(timedelta(minutes=10))
        return ctx.step(h.effect, "after", name="after")

    run = h.runtime.start("wf")
    h.work()
    assert h.status(run.id) == RunStatus.WAITING
    h.clock.advance(timedelta(minutes=9))
    assert h.work() == 0
    h.clock.advance(timedelta(minutes=1))
    h.work()
    assert h.status(run.id) == RunStatus.COMPLETED
    assert h.calls == Counter({"before": 1, "after": 1})


def test_wait_for_returns_the_delivered_data(h: Harness) -> None:
    """wait_for() parks the run until a signal from anywhere, then returns its data."""
    h.workflows.add("wf", lambda ctx, _: ctx.wait_for("approval"))
    run = h.runtime.start("wf")
    h.work()
    assert h.runtime.get(run.id).wait_key == "approval"
    h.runtime.signal(run.id, "approval", {"by": "dana"})
    h.work()
    assert h.runtime.get(run.id).output == {"by": "dana"}


def test_event_delivered_before_the_wait_is_not_lost(h: Harness) -> None:
    """An event that arrives before the workflow waits for it is returned at once."""

    @h.workflows.register("wf")
    def wf(ctx: RunContext, _: Any) -> Any:
        ctx.sleep(timedelta(seconds=5))
        return ctx.wait_for("k")

    run = h.runtime.start("wf")
    h.work()
    h.runtime.signal(run.id, "k", 7)
    assert h.status(run.id) == RunStatus.WAITING
    h.clock.advance(timedelta(seconds=5))
    h.work()
    assert h.runtime.get(run.id).output == 7


def test_wait_timeout_raises_deterministically(h: Harness) -> None:
    """A wait whose timeout passes raises WaitTimedOut, and replay raises it again."""

    @h.workflows.register("wf")
    def wf(ctx: RunContext, _: Any) -> str:
        try:
            ctx.wait_for("never", timeout=timedelta(minutes=1))
        except WaitTimedOut:
            ctx.wait_for("next")
            return "timed out"
        return "got it"

    run = h.runtime.start("wf")
    h.work()
    h.clock.advance(timedelta(minutes=1))
    h.work()
    h.runtime.signal(run.id, "never", "too late")
    h.runtime.signal(run.id, "next")
    h.work()
    assert h.runtime.get(run.id).output == "timed out"


def _park_then(h: Harness, name: str, steps: list[str]) -> RunId:
    registry = Workflows()

    @registry.register(name)
    def original(ctx: RunContext, _: Any) -> None:
        for label in steps:
            ctx.step(h.effect, label, name=label)
        ctx.wait_for("go")

    original_runtime = Runtime(h.store, registry, clock=h.clock)
    run = original_runtime.start(name)
    original_runtime.worker(OPTIONS).run_once()
    return run.id


def test_changed_code_parks_the_run_as_failed_naming_both_steps(h: Harness) -> None:
    """Replaying a journal that the code no longer matches fails the run with both steps named."""
    run_id = _park_then(h, "wf", ["a", "b"])
    h.workflows.add(
        "wf", lambda ctx, _: [ctx.step(h.effect, "a", name="a"), ctx.step(h.effect, "c", name="c")]
    )
    h.runtime.signal(run_id, "go")
    h.work()
    run = h.runtime.get(run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None
    assert run.error.type == "NonDeterminismError"
    assert run.error.details is not None
    assert run.error.details["position"] == 1
    assert (run.error.details["expected"]["name"], run.error.details["found"]["name"]) == ("b", "c")
    assert "'b'" in run.error.message
    assert "'c'" in run.error.message
    assert "input changed" not in run.error.message  # another step: no advice about inputs
    assert h.calls["c"] == 0


def test_a_step_asked_with_another_input_says_what_changed_and_how_to_go_on(h: Harness) -> None:
    """The same step asked with another input (an agent's prompt edited while its run
    waited) fails the run saying its input changed, and how to resume or fork it."""
    run_id = _park_then(h, "wf", ["a"])
    h.workflows.add("wf", lambda ctx, _: ctx.step(h.effect, "edited", name="a"))
    h.runtime.signal(run_id, "go")
    h.work()
    run = h.runtime.get(run_id)
    assert run.error is not None
    assert run.error.type == "NonDeterminismError"
    assert "its input changed since the run began" in run.error.message
    assert "signoff fork RUN --at 0" in run.error.message


def test_fixed_code_resumes_a_parked_run(h: Harness) -> None:
    """After a non-determinism failure, resuming with fixed code completes the run."""
    run_id = _park_then(h, "wf", ["a"])
    h.runtime.signal(run_id, "go")
    h.workflows.add("wf", lambda ctx, _: ctx.step(h.effect, "z", name="z"))
    h.work()
    assert h.status(run_id) == RunStatus.FAILED
    fixed = Workflows()
    fixed.add("wf", lambda ctx, _: [ctx.step(h.effect, "a", name="a"), ctx.wait_for("go")][1])
    h.runtime.resume(run_id)
    Runtime(h.store, fixed, clock=h.clock).worker(OPTIONS).run_once()
    assert h.status(run_id) == RunStatus.COMPLETED
    assert h.calls["a"] == 1


def test_code_that_ends_early_is_non_deterministic(h: Harness) -> None:
    """A workflow that returns before replaying its whole journal is a non-determinism error."""
    run_id = _park_then(h, "wf", ["a", "b"])
    h.workflows.add("wf", lambda ctx, _: ctx.step(h.effect, "a", name="a"))
    h.runtime.signal(run_id, "go")
    h.work()
    run = h.runtime.get(run_id)
    assert run.error is not None
    assert run.error.type == "NonDeterminismError"


def test_swallowing_a_non_determinism_error_does_not_hide_it(h: Harness) -> None:
    """A workflow that catches every Exception still ends failed on non-determinism."""
    run_id = _park_then(h, "wf", ["a"])

    @h.workflows.register("wf")
    def careless(ctx: RunContext, _: Any) -> str:
        with contextlib.suppress(Exception):
            ctx.step(h.effect, "other", name="other")
        return "done"

    h.runtime.signal(run_id, "go")
    h.work()
    assert h.status(run_id) == RunStatus.FAILED


def test_unknown_workflow_on_a_worker_fails_clearly_and_can_resume(h: Harness) -> None:
    """A run whose workflow this worker lacks is failed with a clear error, resumable later."""
    run_id = _park_then(h, "gone", [])
    h.runtime.signal(run_id, "go")
    h.work()
    run = h.runtime.get(run_id)
    assert run.error is not None
    assert "unknown workflow 'gone'" in run.error.message
    h.workflows.add("gone", lambda ctx, _: ctx.wait_for("go"))
    h.runtime.resume(run_id)
    h.work()
    assert h.status(run_id) == RunStatus.COMPLETED


def test_workflow_exception_fails_the_run(h: Harness) -> None:
    """An exception escaping the workflow ends the run failed with its type and message."""

    def boom(ctx: RunContext, _: Any) -> None:
        raise LookupError("no such order")

    h.workflows.add("wf", boom)
    run = h.runtime.start("wf")
    h.work()
    failed = h.runtime.get(run.id)
    assert failed.error is not None
    assert (failed.error.type, failed.error.message) == ("LookupError", "no such order")


def test_cancel_during_a_step_stops_the_run_before_its_next_write(h: Harness) -> None:
    """Cancelling a running run lets the in-flight step finish but journals nothing more."""
    holder: dict[str, RunId] = {}

    def cancel_myself() -> str:
        h.runtime.cancel(holder["id"])
        return h.effect("in flight")

    @h.workflows.register("wf")
    def wf(ctx: RunContext, _: Any) -> None:
        ctx.step(cancel_myself, name="first")
        ctx.step(h.effect, "never", name="second")

    holder["id"] = h.runtime.start("wf").id
    h.work()
    assert h.status(holder["id"]) == RunStatus.CANCELLED
    assert h.runtime.journal(holder["id"]) == []
    assert h.calls == Counter({"in flight": 1})


def test_stopping_worker_releases_its_run_for_another(h: Harness) -> None:
    """A worker told to stop finishes its step, releases the run, and another resumes it."""
    worker = h.runtime.worker(OPTIONS)

    def stop_worker() -> str:
        worker.stop()
        return h.effect("one")

    @h.workflows.register("wf")
    def wf(ctx: RunContext, _: Any) -> str:
        ctx.step(stop_worker, name="one")
        return ctx.step(h.effect, "two", name="two")

    run = h.runtime.start("wf")
    worker.run_once()
    assert h.status(run.id) == RunStatus.PENDING
    h.work()
    assert h.runtime.get(run.id).output == "two"
    assert h.calls == Counter({"one": 1, "two": 1})


def test_journal_kinds_are_recorded(h: Harness) -> None:
    """Each context call leaves an entry of its own kind, in call order."""

    @h.workflows.register("wf")
    def wf(ctx: RunContext, _: Any) -> None:
        ctx.now()
        ctx.uuid()
        ctx.step(h.effect, "x", name="x")
        ctx.sleep(timedelta(0))
        ctx.wait_for("k", timeout=timedelta(0))

    run = h.runtime.start("wf")
    h.work()
    kinds = [s.kind for s in h.runtime.journal(run.id)]
    assert kinds == [
        StepKind.NOW,
        StepKind.UUID,
        StepKind.STEP,
        StepKind.SLEEP,
        StepKind.WAIT_DEADLINE,
        StepKind.WAIT,
    ]
