"""The worker loop under surprises: it logs them and goes on, and shows that it ticks."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

import pytest

from agent_runtime import RunStatus, Runtime, WorkerOptions, Workflows
from agent_runtime.records import Lease, Run
from agent_runtime.testing import InMemoryStore

OPTIONS = WorkerOptions(owner="test", poll_interval=timedelta(milliseconds=5))


class SurprisingStore(InMemoryStore):
    """An in-memory store whose first ``failures`` claims raise an error no one expects."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def claim_runs(
        self, owner: str, *, limit: int, now: datetime, expires_at: datetime
    ) -> list[tuple[Run, Lease]]:
        """Raise while failures are left, then claim as usual."""
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("surprise")
        return super().claim_runs(owner, limit=limit, now=now, expires_at=expires_at)


def test_a_failing_round_is_logged_with_its_traceback_and_the_worker_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two claims raising a bug-like error do not end the loop: the run still completes."""
    store, workflows = SurprisingStore(failures=2), Workflows()
    workflows.add("one", lambda ctx, _: ctx.step(lambda: "done", name="only"))
    runtime = Runtime(store, workflows)
    run = runtime.start("one")
    worker, started = runtime.worker(OPTIONS), time.monotonic()

    with caplog.at_level(logging.ERROR, logger="agent_runtime.worker"):
        worker.run(until_idle=True)

    assert runtime.get(run.id).status == RunStatus.COMPLETED
    failed = [r for r in caplog.records if r.getMessage() == "worker round failed"]
    assert len(failed) == 2
    assert all(r.exc_info is not None and "surprise" in str(r.exc_info[1]) for r in failed)
    assert started < worker.last_tick <= time.monotonic()
