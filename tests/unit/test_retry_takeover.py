"""Retries carry over when another worker takes a run over in the pause between attempts."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from agent_runtime import (
    AttemptRecord,
    ErrorInfo,
    Lease,
    RetryPolicy,
    RunContext,
    RunId,
    RunStatus,
    Runtime,
    StepFailed,
    WorkerOptions,
    Workflows,
)
from agent_runtime.testing import FrozenClock, InMemoryStore
from tests.unit.agent_harness import DONE, LOOKUP, LOOKUP_RETRY, AgentHarness

DELAY = timedelta(seconds=60)
POLICY = RetryPolicy(max_attempts=3, initial_interval=DELAY, backoff=1)
OPTIONS = WorkerOptions(owner="next", lease_ttl=timedelta(seconds=30))


class Takeover:
    """A run of a step that fails while ``failures`` lasts, and a dead worker's attempts."""

    def __init__(self, failures: int) -> None:
        self.clock = FrozenClock()
        self.store = InMemoryStore()
        self.workflows = Workflows()
        self.runtime = Runtime(self.store, self.workflows, clock=self.clock)
        self.calls: Counter[str] = Counter()
        self.failures = failures
        self.workflows.add("wf", self._workflow)

    def _workflow(self, ctx: RunContext, _: Any) -> str:
        result: str = ctx.step(self._flaky, name="flaky", retry=POLICY)
        return result

    def _flaky(self) -> str:
        self.calls["flaky"] += 1
        if self.failures:
            self.failures -= 1
            raise ValueError("not yet")
        return "ok"

    def died_after(self, attempts: int, workflow: str = "wf", error: str = "ValueError") -> RunId:
        """Start a run; a worker records ``attempts`` failed attempts of its step and dies."""
        run_id = self.runtime.start(workflow).id
        ((_, lease),) = self.store.claim_runs(
            "dead", limit=1, now=self.clock.now(), expires_at=self.clock.now() + OPTIONS.lease_ttl
        )
        for number in range(1, attempts + 1):
            self.store.record_attempt(
                lease,
                AttemptRecord(
                    position=0,
                    attempt=number,
                    error=ErrorInfo(type=error, message="not yet"),
                    at=self.clock.now(),
                ),
            )
        return run_id

    def work_after(self, delta: timedelta) -> int:
        """Move the clock by ``delta`` and let a new worker run what is due."""
        self.clock.advance(delta)
        return self.runtime.worker(OPTIONS).run_once()

    def numbers(self, run_id: RunId) -> list[int]:
        """Return the numbers of the run's recorded failed attempts, in order."""
        return [a.attempt for a in self.runtime.attempts(run_id)]


def test_takeover_numbers_the_next_attempt_after_the_recorded_ones() -> None:
    """The worker taking over after attempt 1 runs attempt 2, recorded as such, and succeeds."""
    t = Takeover(failures=0)
    run_id = t.died_after(1)
    t.work_after(DELAY + timedelta(seconds=1))
    (step,) = t.runtime.journal(run_id)
    assert (t.runtime.get(run_id).output, step.attempts, t.numbers(run_id)) == ("ok", 2, [1])
    assert t.calls == Counter({"flaky": 1})


def test_takeover_before_the_retry_is_due_waits_for_it() -> None:
    """A worker that takes over before the retry is due parks the run until then; no early call."""
    t = Takeover(failures=0)
    run_id = t.died_after(1)
    t.work_after(OPTIONS.lease_ttl + timedelta(seconds=1))
    run = t.runtime.get(run_id)
    assert (run.status, run.due_at, t.calls["flaky"]) == (
        RunStatus.WAITING,
        t.runtime.attempts(run_id)[0].at + DELAY,
        0,
    )
    assert t.work_after(DELAY - OPTIONS.lease_ttl - timedelta(seconds=2)) == 0
    t.work_after(timedelta(seconds=1))
    assert t.runtime.get(run_id).output == "ok"
    assert t.calls == Counter({"flaky": 1})


def test_takeover_grants_only_the_attempts_left() -> None:
    """After attempts 1 and 2 of 3 failed elsewhere, one more failure fails the step for good."""
    t = Takeover(failures=5)
    run_id = t.died_after(2)
    t.work_after(DELAY * 2)
    run = t.runtime.get(run_id)
    assert (run.status, t.calls["flaky"], t.numbers(run_id)) == (RunStatus.FAILED, 1, [1, 2, 3])
    assert t.runtime.journal(run_id)[0].attempts == 3


def test_budget_spent_before_the_takeover_fails_without_another_call() -> None:
    """A worker that died after recording the last allowed attempt leaves no attempt to run."""
    t = Takeover(failures=0)
    run_id = t.died_after(3)
    t.work_after(DELAY * 2)
    (step,) = t.runtime.journal(run_id)
    assert (t.runtime.get(run_id).status, t.calls["flaky"]) == (RunStatus.FAILED, 0)
    assert (step.attempts, step.error) == (3, ErrorInfo(type="ValueError", message="not yet"))


def test_recorded_non_retryable_failure_is_final_after_a_takeover() -> None:
    """A recorded failure the policy does not retry is journaled by the next worker, not retried."""
    t = Takeover(failures=0)
    t.workflows.add(
        "strict",
        lambda ctx, _: ctx.step(
            t._flaky, name="flaky", retry=RetryPolicy(non_retryable=(KeyError,))
        ),
    )
    run_id = t.died_after(1, "strict", error="KeyError")
    t.work_after(DELAY)
    assert (t.runtime.get(run_id).status, t.calls["flaky"]) == (RunStatus.FAILED, 0)


def test_worker_stopping_in_the_retry_pause_parks_the_run_until_the_retry() -> None:
    """A worker stopped between attempts leaves the run waiting for the retry time; the next
    worker runs attempt 2."""
    t = Takeover(failures=1)
    worker = t.runtime.worker(OPTIONS)

    def stop_then_fail() -> str:
        worker.stop()
        return t._flaky()

    t.workflows.add("stops", lambda ctx, _: ctx.step(stop_then_fail, name="flaky", retry=POLICY))
    run_id = t.runtime.start("stops").id
    worker.run_once()
    run = t.runtime.get(run_id)
    assert (run.status, run.due_at) == (RunStatus.WAITING, t.clock.now() + DELAY)
    assert t.work_after(DELAY - timedelta(seconds=1)) == 0
    t.work_after(timedelta(seconds=1))
    (step,) = t.runtime.journal(run_id)
    assert (t.runtime.get(run_id).output, step.attempts, t.numbers(run_id)) == ("ok", 2, [1])


def test_replay_of_a_step_failed_after_a_takeover_raises_its_failure() -> None:
    """The failure journaled after a takeover replays as StepFailed naming every attempt."""
    t = Takeover(failures=5)
    seen: list[int] = []

    def workflow(ctx: RunContext, _: Any) -> None:
        try:
            ctx.step(t._flaky, name="flaky", retry=POLICY)
        except StepFailed as failure:
            seen.append(failure.attempts)
        ctx.wait_for("go")

    t.workflows.add("catches", workflow)
    run_id = t.died_after(2, "catches")
    t.work_after(DELAY)
    t.runtime.signal(run_id, "go")
    t.work_after(timedelta(0))
    assert (seen, t.runtime.get(run_id).status) == ([3, 3], RunStatus.COMPLETED)
    assert t.calls["flaky"] == 1


def test_attempt_recorded_twice_fails_the_run_even_if_the_workflow_catches_it() -> None:
    """A second writer of the same attempt is a bug made visible: the run fails with
    AttemptConflict, which the workflow cannot swallow."""
    t = Takeover(failures=0)

    def recorded_elsewhere_then_fails() -> str:
        run = t.store.get_run(run_id)
        t.store.record_attempt(
            Lease(run.id, "other", run.fence),
            AttemptRecord(
                position=0, attempt=2, error=ErrorInfo(type="E", message="e"), at=t.clock.now()
            ),
        )
        raise ValueError("not yet")

    def workflow(ctx: RunContext, _: Any) -> str:
        try:
            ctx.step(recorded_elsewhere_then_fails, name="flaky", retry=POLICY)
        except Exception:
            return "swallowed"
        return "ok"

    t.workflows.add("conflict", workflow)
    run_id = t.died_after(1, "conflict")
    t.work_after(DELAY)
    run = t.runtime.get(run_id)
    assert (run.status, run.error and run.error.type) == (RunStatus.FAILED, "AttemptConflict")


def test_worker_stopping_in_a_tool_retry_pause_leaves_the_retry_to_the_next_worker() -> None:
    """In the agent loop, a tool call failed once by a stopping worker is retried as attempt 2
    by the next worker, when due; the model is not asked again."""
    h = AgentHarness([LOOKUP, DONE])
    worker = h.runtime.worker(WorkerOptions(owner="first", lease_ttl=timedelta(seconds=30)))
    failures = [ValueError("warehouse down")]

    def stop_and_fail_once() -> None:
        worker.stop()
        if failures:
            raise failures.pop()

    h.before_lookup = stop_and_fail_once
    run_id = h.start()
    worker.run_once()
    (failed,) = h.runtime.attempts(run_id)
    run = h.run(run_id)
    pause = LOOKUP_RETRY.initial_interval
    assert (run.status, run.due_at) == (RunStatus.WAITING, failed.at + pause)
    h.clock.advance(pause)
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    assert (h.calls["lookup_order"], len(h.model.requests)) == (2, 2)
    (call,) = [s for s in h.runtime.journal(run_id) if s.name == "tool:lookup_order"]
    assert (call.attempts, [a.attempt for a in h.runtime.attempts(run_id)]) == (2, [1])
