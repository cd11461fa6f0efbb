"""A ``signoff worker`` is woken by a notification, and takes a killed worker's runs over fast.

What each test proves is a time the product keeps, on a machine that may be loaded: a run
woken long before the next poll could have found it (the poll is two minutes, the wait for
the wake a quarter of that), and a takeover measured on the times the database records (the
victim's last lease expiry and the survivor's claim), not on the test's wall clock.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from agent_runtime import Run, RunId, RunStatus, Runtime, WorkerOptions
from bot.app.assembly import load_workflows
from bot.app.settings import Settings
from store import SqlStore, open_store
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
from tests.integration.pgbouncer import reached

SLOW_POLL_S = 120.0
WAKE_S = 30.0
"""How long a woken worker may take to run a run: a quarter of the slow poll, so a run found by
the poll instead would fail, and ample for a loaded machine."""
SETUP_S = 60.0
"""How long a worker process may take to start, listen and hold a run (not under test)."""
TAKEOVER_S = 5.0
"""How long after the victim's lease lapsed a live worker may claim its run: one poll (1 s by
default), with a margin for a loaded machine."""


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
    listening_pg_url: str, pg_store: SqlStore, tmp_path: Path
) -> None:
    """With a two-minute poll, ``signoff worker`` runs a new and a resumed run when woken,
    connected directly or through PgBouncer in session mode."""
    runtime = Runtime(
        pg_store, load_workflows(Settings(workflow_modules=(TEST_WORKFLOWS,), demo=True))
    )
    env = signoff_env(listening_pg_url, poll_interval=SLOW_POLL_S)
    since = datetime.now(UTC)
    with WorkerProcess(env, tmp_path / "worker.log") as worker:
        wait_until(
            lambda: _listening_since(pg_store, since),
            timeout=SETUP_S,
            what="the worker to listen",
            alive=worker,
        )
        run = runtime.start("test.waiter", {"path": str(tmp_path / "out.txt")})
        wait_until(
            lambda: pg_store.get_run(run.id).status == RunStatus.WAITING,
            timeout=WAKE_S,
            what="the new run to be run",
            alive=worker,
        )
        runtime.signal(run.id, "go", "now")
        wait_until(
            lambda: pg_store.get_run(run.id).status.finished,
            timeout=WAKE_S,
            what="the resumed run to finish",
            alive=worker,
        )
        assert worker.stop() == 0, worker.output()
    done = pg_store.get_run(run.id)
    assert done.status == RunStatus.COMPLETED, done.error


def test_sqlite_worker_is_woken_by_its_own_process(sqlite_store: SqlStore, tmp_path: Path) -> None:
    """On SQLite, a run started and resumed in the worker's process runs when woken, not at the
    next (two-minute) poll."""
    _woken_by_its_own_process(sqlite_store, tmp_path)


@pytest.mark.postgres
def test_a_worker_behind_a_transaction_pooler_is_woken_by_its_own_process_without_listen(
    pg_url: str, pg_store: SqlStore, tmp_path: Path
) -> None:
    """Behind PgBouncer in transaction mode no ``LISTEN`` is held (it would not outlast its
    transaction), and a run started and resumed in the worker's process runs when woken, not
    at the next (two-minute) poll."""
    since = datetime.now(UTC)
    with reached("transaction-pooled", pg_url) as url:
        store = open_store(url, migrate=False)
        try:
            _woken_by_its_own_process(store, tmp_path)
        finally:
            store.engine.dispose()
    assert not _listening_since(pg_store, since)


def _woken_by_its_own_process(store: SqlStore, tmp_path: Path) -> None:
    """A worker with a two-minute poll, woken by its process's commits, runs a run started
    and then resumed in its process."""
    runtime = Runtime(
        store, load_workflows(Settings(workflow_modules=(TEST_WORKFLOWS,), demo=True))
    )
    worker = runtime.worker(WorkerOptions(poll_interval=timedelta(seconds=SLOW_POLL_S)))
    thread = threading.Thread(target=worker.run, daemon=True)
    with WakeListener(store.engine, worker.wake):
        thread.start()
        run = runtime.start("test.waiter", {"path": str(tmp_path / "out.txt")})
        wait_until(
            lambda: store.get_run(run.id).status == RunStatus.WAITING,
            timeout=WAKE_S,
            what="the new run to be run",
        )
        runtime.signal(run.id, "go", "now")
        wait_until(
            lambda: store.get_run(run.id).status.finished,
            timeout=WAKE_S,
            what="the resumed run to finish",
        )
        worker.stop()
        thread.join()
    assert store.get_run(run.id).status == RunStatus.COMPLETED


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> tuple[str, SqlStore]:
    """An empty database on SQLite (a file in tmp_path) or on the test PostgreSQL server."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url"), request.getfixturevalue("sqlite_store")
    return request.getfixturevalue("pg_url"), request.getfixturevalue("pg_store")


def test_a_killed_workers_run_is_taken_over_within_seconds(
    database: tuple[str, SqlStore], tmp_path: Path
) -> None:
    """With default settings, a SIGKILLed worker's lease lapses within its TTL and a live worker
    claims the run within seconds of that (times the database records), each step once."""
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
            lambda: held_by(victim),
            timeout=SETUP_S,
            what="the victim to hold the run",
            alive=victim,
        )
        with WorkerProcess(env, tmp_path / "survivor.log") as survivor:
            probe = runtime.start("demo.trivial", {"n": 1}).id  # the victim has no thread free
            wait_until(
                lambda: store.get_run(probe).status.finished,
                timeout=SETUP_S,
                what="the survivor to be up and claiming runs",
                alive=survivor,
            )
            before = store.get_run(run_id)
            killed_at = datetime.now(UTC)
            victim.sigkill()
            lapsed_at = _lease_lapsed_at(store.get_run(run_id), before, victim)
            wait_until(
                lambda: held_by(survivor), timeout=SETUP_S, what="the takeover", alive=survivor
            )
            claimed_at = store.get_run(run_id).updated_at  # the claim; nothing wrote it since
            gate.touch()
            wait_until(
                lambda: store.get_run(run_id).status.finished,
                timeout=SETUP_S,
                what="the run to finish",
                alive=survivor,
            )
            assert survivor.stop() == 0, survivor.output()
    assert lapsed_at <= killed_at + Settings().lease_ttl, "a lease lapses within its TTL"
    assert claimed_at - lapsed_at < timedelta(seconds=TAKEOVER_S), (lapsed_at, claimed_at)
    assert store.get_run(run_id).status == RunStatus.COMPLETED
    assert lines(out) == expected_steps(3), "each step ran once"


def _lease_lapsed_at(after: Run, before: Run, victim: WorkerProcess) -> datetime:
    """When the killed victim's lease lapsed: its expiry read once it could renew no more, or
    (if the run had moved on already) the expiry read before the kill, which is no later."""
    lease = after if owner_pid(after.lease_owner) == victim.pid else before
    assert lease.due_at is not None, "a held run is due when its lease lapses"
    return lease.due_at
