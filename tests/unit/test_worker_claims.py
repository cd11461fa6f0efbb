"""How a worker claims runs and reads their journals, on the in-memory store."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from agent_runtime import (
    Fork,
    Lease,
    Run,
    RunContext,
    RunId,
    RunStatus,
    Runtime,
    StepRecord,
    WorkerOptions,
    Workflows,
)
from agent_runtime.testing import FrozenClock, InMemoryStore


class RecordingStore(InMemoryStore):
    """Notes which thread claimed each run and which journals were read."""

    def __init__(self) -> None:
        super().__init__()
        self.claimed_on: list[str] = []
        self.journals_read: Counter[RunId] = Counter()

    def claim_runs(
        self, owner: str, *, limit: int, now: datetime, expires_at: datetime
    ) -> list[tuple[Run, Lease]]:
        """Claim, noting the claiming thread once per run claimed."""
        claimed = super().claim_runs(owner, limit=limit, now=now, expires_at=expires_at)
        self.claimed_on += [threading.current_thread().name] * len(claimed)
        return claimed

    def load_journal(self, run_id: RunId) -> list[StepRecord]:
        """Load, counting the reads per run."""
        self.journals_read[run_id] += 1
        return super().load_journal(run_id)


def _one_step(ctx: RunContext, _: Any) -> str:
    return ctx.step(lambda: "done", name="only")


def _runtime(store: RecordingStore, clock: FrozenClock | None = None) -> Runtime:
    workflows = Workflows()
    workflows.add("one", _one_step)
    return Runtime(store, workflows, clock=clock)


def test_a_run_thread_claims_the_next_run_itself() -> None:
    """A thread that ends a run claims the next due one: claims do not queue behind one loop."""
    store = RecordingStore()
    runtime = _runtime(store)
    runs = [runtime.start("one") for _ in range(3)]
    options = WorkerOptions(concurrency=1, poll_interval=timedelta(milliseconds=10))
    runtime.worker(options).run(until_idle=True)
    assert all(runtime.get(run.id).status is RunStatus.COMPLETED for run in runs)
    assert sum(name.startswith("signoff-run") for name in store.claimed_on) == 2, store.claimed_on


def test_a_first_claim_reads_no_journal() -> None:
    """A run claimed for the first time starts from an empty journal without reading it."""
    store = RecordingStore()
    runtime = _runtime(store)
    run = runtime.start("one")
    assert runtime.worker(WorkerOptions()).run_once() == 1
    assert runtime.get(run.id).status is RunStatus.COMPLETED
    assert store.journals_read[run.id] == 0


def test_a_resumed_run_and_a_fork_read_their_journals() -> None:
    """A run claimed again (fence above 1) and a fork (inherited entries) read the journal."""
    clock = FrozenClock()
    store = RecordingStore()
    runtime = _runtime(store, clock)

    def sleeper(ctx: RunContext, _: Any) -> str:
        ctx.step(lambda: "before", name="before")
        ctx.sleep(timedelta(minutes=1))
        return ctx.step(lambda: "after", name="after")

    runtime.workflows.add("sleeper", sleeper)
    run = runtime.start("sleeper")
    runtime.worker(WorkerOptions()).run_once()
    clock.advance(timedelta(minutes=1))
    runtime.worker(WorkerOptions()).run_once()
    assert runtime.get(run.id).status is RunStatus.COMPLETED
    assert store.journals_read[run.id] == 1
    fork = runtime.start(
        "sleeper", fork=Fork(source=run.id, at=1, steps=tuple(runtime.journal(run.id)[:1]))
    )
    runtime.worker(WorkerOptions()).run_once()
    assert store.journals_read[fork.id] == 1
    assert [s.output for s in runtime.journal(fork.id)][:1] == ["before"]
