"""A real ``signoff worker`` stops in the pause after a failed attempt; another one retries.

The step appends ``attempt <n>`` to a file and fails on its first two attempts, so the file
tells how many times it really ran. Each scenario runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from tests.integration import WorkerProcess, lines, signoff_env, test_crash, wait_until

RETRY = timedelta(seconds=1.5)
database = test_crash.database
"""An empty database on SQLite or PostgreSQL (the fixture of the crash tests)."""


def _sigkill(worker: WorkerProcess) -> None:
    worker.sigkill()


def _sigterm(worker: WorkerProcess) -> None:
    assert worker.stop() == 0, worker.output()


@pytest.mark.parametrize("stop", [_sigkill, _sigterm], ids=["sigkill", "sigterm"])
def test_retries_continue_on_the_next_worker(
    database: test_crash.Database, tmp_path: Path, stop: Callable[[WorkerProcess], None]
) -> None:
    """Stopped after attempt 1 failed, a worker leaves attempts 2 and 3 to the next one, which
    starts them no earlier than due and completes the run."""
    out = tmp_path / "out.txt"
    run = database.runtime.start(
        "test.retried", {"path": str(out), "retry_s": RETRY.total_seconds(), "failures": 2}
    )
    with WorkerProcess(signoff_env(database.url), tmp_path / "first-worker.log") as first:
        wait_until(
            lambda: database.store.list_attempts(run.id),
            timeout=20,
            what="attempt 1 to be recorded",
            alive=first,
        )
        stop(first)
    (failed,) = database.store.list_attempts(run.id)
    assert (failed.position, failed.attempt, lines(out)) == (0, 1, ["attempt 1"])

    done = test_crash._resume_with_new_worker(database, run.id, tmp_path)
    assert done.output == {"attempt": 3}
    assert lines(out) == ["attempt 1", "attempt 2", "attempt 3"]
    attempts = database.store.list_attempts(run.id)
    assert [(a.attempt, a.error.message) for a in attempts] == [
        (1, "attempt 1 fails"),
        (2, "attempt 2 fails"),
    ]
    (step,) = database.store.load_journal(run.id)
    assert step.attempts == 3
    assert step.started_at >= failed.at + RETRY, "attempt 2 started before it was due"
    assert attempts[1].at - attempts[0].at >= RETRY
