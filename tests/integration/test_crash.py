"""SIGKILL a real ``signoff worker`` at each kind of point in a run; a new worker resumes it.

The external effect of each step is a line appended to a file, so the file tells how many
times each step really ran. Every scenario runs on SQLite (a file) and on PostgreSQL.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_runtime import Run, RunId, RunStatus, Runtime, StepKind
from bot.app.assembly import load_workflows
from bot.app.settings import Settings
from store import SqlStore
from tests.flows import HANG_AT_ENV, HANG_MARKER_ENV
from tests.integration import (
    TEST_WORKFLOWS,
    WorkerProcess,
    cli_ok,
    demo_input,
    expected_steps,
    lines,
    signoff_env,
    wait_until,
)

RESUME_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Database:
    """A migrated, empty database: its URL, a store on it and a runtime to start runs."""

    url: str
    store: SqlStore
    runtime: Runtime

    def run(self, run_id: RunId) -> Run:
        """Return the run as stored now."""
        return self.store.get_run(run_id)

    def finished(self, run_id: RunId) -> Run | None:
        """Return the run if it has finished, else None."""
        run = self.store.get_run(run_id)
        return run if run.status.finished else None

    def status_is(self, run_id: RunId, status: RunStatus) -> Run | None:
        """Return the run if it has ``status``, else None."""
        run = self.store.get_run(run_id)
        return run if run.status == status else None


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> Database:
    """An empty database on SQLite (a file in tmp_path) or on the test PostgreSQL server."""
    if request.param == "sqlite":
        url: str = request.getfixturevalue("sqlite_url")
        store: SqlStore = request.getfixturevalue("sqlite_store")
    else:
        url = request.getfixturevalue("pg_url")
        store = request.getfixturevalue("pg_store")
    return Database(
        url,
        store,
        Runtime(store, load_workflows(Settings(workflow_modules=(TEST_WORKFLOWS,), demo=True))),
    )


def _resume_with_new_worker(database: Database, run_id: RunId, tmp_path: Path) -> Run:
    """Start a fresh worker, wait until the run finishes, stop the worker cleanly."""
    env = signoff_env(database.url)
    with WorkerProcess(env, tmp_path / "second-worker.log") as second:
        done = wait_until(
            lambda: database.finished(run_id),
            timeout=RESUME_TIMEOUT_S,
            what="the resumed run to finish",
            alive=second,
        )
        assert second.stop() == 0, second.output()
    assert done.status == RunStatus.COMPLETED, done.error
    return done


def test_kill_inside_a_step_resumes_at_that_step(database: Database, tmp_path: Path) -> None:
    """Killed inside a step: a new worker resumes at that step; no committed step runs again."""
    n = 4
    out = tmp_path / "out.txt"
    run = database.runtime.start("demo.steps", demo_input(out, n=n, delay_ms=400))
    with WorkerProcess(signoff_env(database.url), tmp_path / "first-worker.log") as first:
        wait_until(
            lambda: len(database.store.load_journal(run.id)) >= 2,
            timeout=20,
            what="two committed steps",
            alive=first,
        )
        first.sigkill()

    committed = len(database.store.load_journal(run.id))  # exact: nobody can write now
    assert 2 <= committed < n, f"the kill must land mid-run, not after step {committed}"
    killed = database.run(run.id)
    assert killed.status == RunStatus.RUNNING
    assert killed.lease_owner is not None
    in_flight = committed + 1
    effects = lines(out)
    # The kill lands during the in-flight step's 400 ms delay, before its effect (nearly
    # always); should it land between the effect and the commit, that step shows twice.
    assert effects in (expected_steps(committed), expected_steps(in_flight)), effects
    effect_done = len(effects) == in_flight

    done = _resume_with_new_worker(database, run.id, tmp_path)
    assert done.output == {"steps": n}
    expected = expected_steps(n)
    if effect_done:
        expected.insert(in_flight, f"step {in_flight}")
    assert lines(out) == expected, "committed steps ran once; the resume began at the in-flight one"
    entries = database.store.load_journal(run.id)
    assert [(s.position, s.name, s.attempts) for s in entries] == [
        (i - 1, f"step {i}", 1) for i in range(1, n + 1)
    ]
    assert done.fence == 2, "claimed once by each worker"


def test_kill_after_step_ran_before_commit_reruns_only_that_step(
    database: Database, tmp_path: Path
) -> None:
    """Killed after step 2's effect but before its commit: only step 2 runs again (twice total)."""
    out, marker = tmp_path / "out.txt", tmp_path / "hang.json"
    run = database.runtime.start("demo.steps", demo_input(out, n=3, delay_ms=0))
    env = signoff_env(database.url, extra={HANG_AT_ENV: "1", HANG_MARKER_ENV: str(marker)})
    with WorkerProcess(env, tmp_path / "first-worker.log") as first:
        wait_until(marker.exists, timeout=20, what="the hook before step 2's commit", alive=first)
        first.sigkill()

    assert json.loads(marker.read_text())["position"] == 1
    assert lines(out) == ["step 1", "step 2"], "step 2 ran before the kill"
    assert [s.name for s in database.store.load_journal(run.id)] == ["step 1"], (
        "step 2's journal entry was never committed"
    )

    _resume_with_new_worker(database, run.id, tmp_path)
    effects = lines(out)
    assert effects == ["step 1", "step 2", "step 2", "step 3"]
    counts = Counter(effects)
    assert counts["step 1"] == 1, "a step committed before the crash never runs again"
    assert counts["step 2"] <= 2, "the in-flight step runs at most once more"
    assert [s.name for s in database.store.load_journal(run.id)] == expected_steps(3)


def test_kill_during_durable_sleep(database: Database, tmp_path: Path) -> None:
    """A run parked in a durable sleep survives its worker's death and wakes on time, once."""
    out = tmp_path / "out.txt"
    run = database.runtime.start("test.sleepy", {"path": str(out), "seconds": 1.0})
    with WorkerProcess(signoff_env(database.url), tmp_path / "first-worker.log") as first:
        sleeping = wait_until(
            lambda: database.status_is(run.id, RunStatus.WAITING),
            timeout=20,
            what="the run to sleep",
            alive=first,
        )
        first.sigkill()

    assert lines(out) == ["step 1"]
    assert sleeping.due_at is not None
    assert sleeping.lease_owner is None

    done = _resume_with_new_worker(database, run.id, tmp_path)
    assert done.output == {"slept": True}
    assert lines(out) == ["step 1", "step 2"]
    entries = database.store.load_journal(run.id)
    assert [s.kind for s in entries] == [StepKind.STEP, StepKind.SLEEP, StepKind.STEP]
    assert entries[2].started_at >= sleeping.due_at, "step 2 ran before the sleep ended"


def test_kill_during_durable_wait_then_signal(database: Database, tmp_path: Path) -> None:
    """A run waiting for an event survives its worker's death; `signoff signal` wakes it once."""
    out = tmp_path / "out.txt"
    run = database.runtime.start("test.waiter", {"path": str(out)})
    env = signoff_env(database.url)
    with WorkerProcess(env, tmp_path / "first-worker.log") as first:
        waiting = wait_until(
            lambda: database.status_is(run.id, RunStatus.WAITING),
            timeout=20,
            what="the run to wait",
            alive=first,
        )
        first.sigkill()

    assert waiting.wait_key == "go"
    assert lines(out) == ["step 1"]
    signalled = json.loads(cli_ok(env, "signal", run.id, "go", "--data", '{"n": 7}', "--json"))
    assert signalled["status"] == "pending"

    done = _resume_with_new_worker(database, run.id, tmp_path)
    assert done.output == {"got": {"n": 7}}
    assert lines(out) == ["step 1", "step 2"]
    entries = database.store.load_journal(run.id)
    assert [s.kind for s in entries] == [
        StepKind.STEP,
        StepKind.WAIT_DEADLINE,
        StepKind.WAIT,
        StepKind.STEP,
    ]
