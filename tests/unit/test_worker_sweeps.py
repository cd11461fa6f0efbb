"""A worker sweeps beside its claim loop or leaves that to its scheduler; in it only until idle."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta

from agent_runtime import RunStatus, Runtime, WorkerOptions, Workflows
from agent_runtime.testing import InMemoryStore
from tests.integration.slack_harness import (
    eventually,
)

OPTIONS = WorkerOptions(owner="test", poll_interval=timedelta(milliseconds=5))
WAIT_S = 10.0
STUCK_S = 60.0
"""Longer than any wait here: only the end of the test releases the sweep."""


def _sweep_threads() -> list[threading.Thread]:
    """The sweep threads alive in this process now (any worker's)."""
    return [thread for thread in threading.enumerate() if thread.name == "signoff-sweep"]


def test_a_slow_sweep_does_not_hold_up_claims() -> None:
    """While a sweep is stuck (say, expiring a long backlog), the worker still runs a new run."""
    sweeping, release = threading.Event(), threading.Event()

    def stuck_sweep() -> None:
        sweeping.set()
        release.wait(STUCK_S)

    workflows = Workflows()
    workflows.add("one", lambda ctx, _: ctx.step(lambda: "done", name="only"))
    runtime = Runtime(InMemoryStore(), workflows, sweeps=[stuck_sweep])
    worker = runtime.worker(OPTIONS)
    loop = threading.Thread(target=worker.run)
    loop.start()
    try:
        assert sweeping.wait(WAIT_S)
        run = runtime.start("one")
        eventually(
            lambda: runtime.get(run.id).status == RunStatus.COMPLETED,
            what="the run to complete during the sweep",
            timeout=WAIT_S,
        )
        assert not release.is_set()
    finally:
        release.set()
        worker.stop()
        loop.join()


def test_a_stopping_worker_does_not_wait_out_a_long_sweep() -> None:
    """``stop()`` ends ``run()`` within seconds even while a sweep is still going."""
    sweeping, release = threading.Event(), threading.Event()

    def stuck_sweep() -> None:
        sweeping.set()
        release.wait(STUCK_S)

    runtime = Runtime(InMemoryStore(), Workflows(), sweeps=[stuck_sweep])
    worker = runtime.worker(OPTIONS)
    loop = threading.Thread(target=worker.run)
    loop.start()
    try:
        assert sweeping.wait(WAIT_S)
        worker.stop()
        loop.join(WAIT_S)
        assert not loop.is_alive(), "run() waited for the sweep"
    finally:
        release.set()
        loop.join()


def test_a_worker_whose_process_schedules_the_sweeps_starts_no_sweep_thread() -> None:
    """With ``sweep_thread=False`` the worker runs runs but never sweeps beside its loop."""
    swept = threading.Event()
    workflows = Workflows()
    workflows.add("one", lambda ctx, _: ctx.step(lambda: "done", name="only"))
    runtime = Runtime(InMemoryStore(), workflows, sweeps=[swept.set])
    worker = runtime.worker(dataclasses.replace(OPTIONS, sweep_thread=False))
    # a sweep thread an earlier test left (still ending) is not this worker's
    before = set(_sweep_threads())
    loop = threading.Thread(target=worker.run)
    loop.start()
    try:
        run = runtime.start("one")
        eventually(
            lambda: runtime.get(run.id).status == RunStatus.COMPLETED,
            what="the run to complete",
            timeout=WAIT_S,
        )
        assert set(_sweep_threads()) <= before
    finally:
        worker.stop()
        loop.join()
    assert not swept.is_set()


def test_a_worker_run_until_idle_sweeps_in_its_loop_without_a_sweep_thread() -> None:
    """``run(until_idle=True)`` still sweeps in its claim loop when ``sweep_thread`` is off."""
    swept = threading.Event()
    runtime = Runtime(InMemoryStore(), Workflows(), sweeps=[swept.set])
    runtime.worker(dataclasses.replace(OPTIONS, sweep_thread=False)).run(until_idle=True)
    assert swept.is_set()
