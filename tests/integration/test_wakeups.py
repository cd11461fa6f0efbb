"""A ``signoff worker`` is woken by a notification, and takes a killed worker's runs over fast."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from agent_runtime import RunId, RunStatus, Runtime, WorkerOptions
from bot.app.assembly import load_workflows
from bot.app.settings import Settings
from store import SqlStore
from store.notify import WakeListener
from tests.integration import (
    TEST_WORKFLOWS,
    WorkerProcess,
    expected_steps,
    lines,
    owner_pid,
    signoff_env,
    wait_until,
)

SLOW_POLL_S = 30.0
FAST_S = 10.0
"""Well under the slow poll, and well under the 30 s lease the takeover used to wait for."""


def _default_env(url: str) -> dict[str, str]:
    """The environment of a ``signoff`` process with the default lease and poll interval."""
    env = signoff_env(url)
    del env["SIGNOFF_LEASE_TTL_SECONDS"], env["SIGNOFF_POLL_INTERVAL_SECONDS"]
    return env


def _listening_since(store: SqlStore, since: datetime) -> bool:
    """Whether a connection opened after ``since`` listens for wake-ups."""
    with store.engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND query LIKE 'LISTEN%' AND backend_start > :since"
                ),
                {"since": since},
            ).scalar()
        )


@pytest.mark.postgres
def test_worker_alone_is_woken_by_a_started_and_a_resumed_run(
    pg_url: str, pg_store: SqlStore, tmp_path: Path
) -> None:
    """With a 30 s poll, ``signoff worker`` still runs a new and a resumed run within seconds."""
    runtime = Runtime(
        pg_store, load_workflows(Settings(workflow_modules=(TEST_WORKFLOWS,), demo=True))
    )
    env = signoff_env(pg_url, poll_interval=SLOW_POLL_S)
    since = datetime.now(UTC)
    with WorkerProcess(env, tmp_path / "worker.log") as worker:
        wait_until(
            lambda: _listening_since(pg_store, since),
            timeout=FAST_S,
            what="the worker to listen",
            alive=worker,
        )
        run = runtime.start("test.waiter", {"path": str(tmp_path / "out.txt")})
        wait_until(
            lambda: pg_store.get_run(run.id).status == RunStatus.WAITING,
            timeout=FAST_S,
            what="the new run to be run",
            alive=worker,
        )
        runtime.signal(run.id, "go", "now")
        wait_until(
            lambda: pg_store.get_run(run.id).status.finished,
            timeout=FAST_S,
            what="the resumed run to finish",
            alive=worker,
        )
        assert worker.stop() == 0, worker.output()
    done = pg_store.get_run(run.id)
    assert done.status == RunStatus.COMPLETED, done.error


def test_sqlite_worker_is_woken_by_its_own_process(sqlite_store: SqlStore, tmp_path: Path) -> None:
    """On SQLite, a run started and resumed in the worker's process runs at once, not at the
    next (30 s) poll."""
    runtime = Runtime(
        sqlite_store, load_workflows(Settings(workflow_modules=(TEST_WORKFLOWS,), demo=True))
    )
    worker = runtime.worker(WorkerOptions(poll_interval=timedelta(seconds=SLOW_POLL_S)))
    thread = threading.Thread(target=worker.run, daemon=True)
    with WakeListener(sqlite_store.engine, worker.wake):
        thread.start()
        run = runtime.start("test.waiter", {"path": str(tmp_path / "out.txt")})
        wait_until(
            lambda: sqlite_store.get_run(run.id).status == RunStatus.WAITING,
            timeout=FAST_S,
            what="the new run to be run",
        )
        runtime.signal(run.id, "go", "now")
        wait_until(
            lambda: sqlite_store.get_run(run.id).status.finished,
            timeout=FAST_S,
            what="the resumed run to finish",
        )
        worker.stop()
        thread.join()
    assert sqlite_store.get_run(run.id).status == RunStatus.COMPLETED


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> tuple[str, SqlStore]:
    """An empty database on SQLite (a file in tmp_path) or on the test PostgreSQL server."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url"), request.getfixturevalue("sqlite_store")
    return request.getfixturevalue("pg_url"), request.getfixturevalue("pg_store")


def test_a_killed_workers_run_is_taken_over_within_seconds(
    database: tuple[str, SqlStore], tmp_path: Path
) -> None:
    """With default settings, a run held by a SIGKILLed worker moves to a live worker well
    within the old 30 s lease, and each of its steps still runs once."""
    url, store = database
    runtime = Runtime(
        store, load_workflows(Settings(workflow_modules=(TEST_WORKFLOWS,), demo=True))
    )
    out, gate, env = tmp_path / "out.txt", tmp_path / "gate", _default_env(url)
    run_id: RunId = runtime.start("test.held", {"path": str(out), "n": 3, "gate": str(gate)}).id

    def held_by(worker: WorkerProcess) -> bool:
        run = store.get_run(run_id)
        return owner_pid(run.lease_owner) == worker.pid and len(store.load_journal(run_id)) == 1

    with WorkerProcess(env, tmp_path / "victim.log", concurrency=1) as victim:
        wait_until(
            lambda: held_by(victim), timeout=60, what="the victim to hold the run", alive=victim
        )
        with WorkerProcess(env, tmp_path / "survivor.log") as survivor:
            victim.sigkill()
            killed = time.monotonic()
            wait_until(
                lambda: held_by(survivor), timeout=FAST_S, what="the takeover", alive=survivor
            )
            took = time.monotonic() - killed
            gate.touch()
            wait_until(
                lambda: store.get_run(run_id).status.finished,
                timeout=60,
                what="the run to finish",
                alive=survivor,
            )
            assert survivor.stop() == 0, survivor.output()
    assert took < FAST_S
    assert store.get_run(run_id).status == RunStatus.COMPLETED
    assert lines(out) == expected_steps(3), "each step ran once"
