"""Two ``signoff worker`` processes on one PostgreSQL database share the runs safely."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime import Run, RunId, RunStatus, Runtime
from bot.app.assembly import load_workflows
from bot.app.settings import Settings
from store import SqlStore
from tests.integration import (
    TEST_WORKFLOWS,
    WorkerProcess,
    expected_steps,
    lines,
    owner_pid,
    signoff_env,
    wait_until,
)

pytestmark = pytest.mark.postgres


def _runtime(store: SqlStore) -> Runtime:
    return Runtime(store, load_workflows(Settings(workflow_modules=(TEST_WORKFLOWS,), demo=True)))


def _all_finished(store: SqlStore, run_ids: list[RunId]) -> list[Run] | None:
    runs = [store.get_run(run_id) for run_id in run_ids]
    return runs if all(run.status.finished for run in runs) else None


def test_two_workers_finish_every_run_exactly_once(
    pg_url: str, pg_store: SqlStore, tmp_path: Path
) -> None:
    """20 runs on two workers: both take runs, each run is claimed once and each step runs once."""
    n = 5
    runtime = _runtime(pg_store)
    gate = tmp_path / "gate"
    outs = [tmp_path / f"out-{i}.txt" for i in range(20)]
    # Every run waits for the gate inside step 2, so neither worker can finish all 20 before
    # the other has started, whichever of them starts first.
    run_ids = [
        runtime.start("test.held", {"path": str(out), "n": n, "gate": str(gate)}).id for out in outs
    ]
    env = signoff_env(pg_url, lease_ttl=5.0)

    def owners() -> set[int | None]:
        return {owner_pid(r.lease_owner) for r in pg_store.list_runs() if r.lease_owner}

    with (
        WorkerProcess(env, tmp_path / "a.log", concurrency=4) as a,
        WorkerProcess(env, tmp_path / "b.log", concurrency=4) as b,
    ):
        wait_until(lambda: owners() >= {a.pid, b.pid}, timeout=60, what="both workers to hold runs")
        gate.touch()
        runs = wait_until(
            lambda: _all_finished(pg_store, run_ids), timeout=60, what="all 20 runs to finish"
        )
        assert a.stop() == 0, a.output()
        assert b.stop() == 0, b.output()

    for run, out in zip(runs, outs, strict=True):
        assert run.status == RunStatus.COMPLETED, run.error
        assert run.fence == 1, f"run {run.id} was claimed {run.fence} times"
        assert lines(out) == expected_steps(n)
        entries = pg_store.load_journal(run.id)
        assert [(s.name, s.attempts) for s in entries] == [
            (f"step {i}", 1) for i in range(1, n + 1)
        ]


def test_survivor_takes_over_a_killed_workers_runs(
    pg_url: str, pg_store: SqlStore, tmp_path: Path
) -> None:
    """SIGKILL one of two busy workers: the other adopts its runs once their leases expire,
    replays the committed step and runs every other step exactly once."""
    n, ttl, poll = 3, 1.0, 0.2
    runtime = _runtime(pg_store)
    gate = tmp_path / "gate"
    outs = [tmp_path / f"out-{i}.txt" for i in range(6)]

    def start(batch: list[Path]) -> list[RunId]:
        return [
            runtime.start("test.held", {"path": str(out), "n": n, "gate": str(gate)}).id
            for out in batch
        ]

    def owned_by(worker: WorkerProcess, ids: list[RunId], committed: int | None = None) -> bool:
        runs = [pg_store.get_run(run_id) for run_id in ids]
        return all(owner_pid(run.lease_owner) == worker.pid for run in runs) and (
            committed is None
            or all(len(pg_store.load_journal(run_id)) == committed for run_id in ids)
        )

    env = signoff_env(pg_url, lease_ttl=ttl, poll_interval=poll)
    first_batch = start(outs[:3])
    # The victim can hold 3 runs, so the second batch goes to the survivor. Every run
    # commits step 1 and then waits for the gate inside step 2.
    with WorkerProcess(env, tmp_path / "victim.log", concurrency=3) as victim:
        wait_until(
            lambda: owned_by(victim, first_batch, committed=1),
            timeout=60,
            what="the victim to hold the first batch past step 1",
            alive=victim,
        )
        second_batch = start(outs[3:])
        with WorkerProcess(env, tmp_path / "survivor.log", concurrency=10) as survivor:
            wait_until(
                lambda: owned_by(survivor, second_batch),
                timeout=60,
                what="the survivor to hold the second batch",
                alive=survivor,
            )
            victim.assert_alive()
            victim.sigkill()
            assert owned_by(victim, first_batch, committed=1), "the victim died holding them"
            gate.touch()
            wait_until(
                lambda: owned_by(survivor, first_batch) or _all_finished(pg_store, first_batch),
                timeout=60,
                what="the takeover",
                alive=survivor,
            )
            runs = wait_until(
                lambda: _all_finished(pg_store, first_batch + second_batch),
                timeout=60,
                what="all runs to finish",
                alive=survivor,
            )
            assert survivor.stop() == 0, survivor.output()

    for run, out in zip(runs, outs, strict=True):
        assert run.status == RunStatus.COMPLETED, run.error
        assert lines(out) == expected_steps(n), f"each step of {run.id} ran once, in order"
        assert [s.name for s in pg_store.load_journal(run.id)] == expected_steps(n)
        assert run.fence == (2 if run.id in first_batch else 1)
