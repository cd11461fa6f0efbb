"""The ``signoff`` command line as a user runs it: subprocesses on a SQLite file.

Each behaviour's exit status and output are proven by a process started from the ``signoff``
script. Workers that only move runs along are processes forked from a warm launcher, and
reads that only check state, and the repeated bad-input cases, run through the same entry
point (``bot.cli.main.main``) in the test's process.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import time
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

from store.migrate import MIGRATIONS
from tests.integration import (
    WorkerProcess,
    cli_ok,
    expected_steps,
    lines,
    owner_pid,
    run_cli,
    signoff_env,
    wait_until,
)
from tests.integration.in_process import Cli, InProcessCli
from tests.integration.worker_processes import (
    Launcher,
)

RUN_KEYS = [
    "created_at",
    "due_at",
    "error",
    "fork_at",
    "forked_from",
    "id",
    "input",
    "lease_owner",
    "output",
    "status",
    "updated_at",
    "wait_key",
    "workflow",
]
STEP_KEYS = [
    "attempts",
    "error",
    "failed_attempts",
    "finished_at",
    "input_hash",
    "kind",
    "name",
    "output",
    "position",
    "started_at",
]
UNKNOWN_RUN = "0123456789abcdef0123456789abcdef"
TABLES = {"alembic_version", "runs", "steps", "attempts", "events"}
RELEASED_S = 5.0
"""How soon after SIGTERM a worker gives its run back: the rest of a 0.8 s step and one write."""
STOPPED_S = 30.0
"""Half the 60 s lease of the SIGTERM test: a worker that waited for that lease would take
longer; a loaded machine starts and stops a process well within it."""


def _env(
    db: Path, *, lease_ttl: float = 1.0, extra: dict[str, str] | None = None
) -> dict[str, str]:
    return signoff_env(f"sqlite:///{db}", lease_ttl=lease_ttl, extra=extra)


def _json(cli: Cli, env: dict[str, str], *args: str) -> Any:
    done = cli(env, *args, "--json")
    assert done.returncode == 0, (args, done.returncode, done.stderr)
    return json.loads(done.stdout)


def _snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Return every row of every table, to compare the database before and after a command."""
    with closing(sqlite3.connect(db)) as conn:
        return {
            t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
            for t in _tables(conn)
        }


def _status(db: Path, run_id: str) -> tuple[str, str | None]:
    """Read a run's status and wait key straight from the database file."""
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute("SELECT status, wait_key FROM runs WHERE id = ?", (run_id,)).fetchone()
    assert row is not None, run_id
    return row[0], row[1]


def _lease_owner(db: Path, run_id: str) -> str | None:
    """Read the run's lease owner straight from the database file."""
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute("SELECT lease_owner FROM runs WHERE id = ?", (run_id,)).fetchone()
    owner: str | None = row[0]
    return owner


def _tables(conn: sqlite3.Connection) -> set[str]:
    query = "SELECT name FROM sqlite_master WHERE type = 'table'"
    return {row[0] for row in conn.execute(query)}


def _assert_user_error(done: Any, expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.endswith("\n")
    message = done.stderr.rstrip("\n")
    assert "\n" not in message, f"expected one line, got:\n{done.stderr}"
    assert message.startswith("signoff: error: "), message
    assert expected in message, message


def test_start_work_and_inspect_as_json_and_text(tmp_path: Path) -> None:
    """start -> worker --until-idle -> show/runs give the completed run as stable JSON and text."""
    db, out = tmp_path / "signoff.db", tmp_path / "out.txt"
    env = _env(db)
    run_input = {"n": 3, "delay_ms": 0, "path": str(out)}
    started = _json(run_cli, env, "start", "demo.steps", "--input", json.dumps(run_input))
    assert list(started) == RUN_KEYS
    assert started["status"] == "pending"
    assert started["input"] == run_input
    run_id = started["id"]
    assert re.fullmatch("[0-9a-f]{32}", run_id), run_id

    assert cli_ok(env, "worker", "--until-idle") == ""
    assert lines(out) == expected_steps(3)

    shown = _json(run_cli, env, "show", run_id)
    assert list(shown) == sorted(shown), "keys come out sorted"
    assert set(shown) >= {*RUN_KEYS, "steps"}
    assert {
        k: shown[k]
        for k in (
            "id",
            "workflow",
            "status",
            "output",
            "error",
            "lease_owner",
            "due_at",
            "wait_key",
        )
    } == {
        "id": run_id,
        "workflow": "demo.steps",
        "status": "completed",
        "output": {"steps": 3},
        "error": None,
        "lease_owner": None,
        "due_at": None,
        "wait_key": None,
    }
    assert [list(step) for step in shown["steps"]] == [STEP_KEYS] * 3
    assert [
        (
            s["position"],
            s["kind"],
            s["name"],
            s["output"],
            s["attempts"],
            s["error"],
            s["failed_attempts"],
        )
        for s in shown["steps"]
    ] == [(i - 1, "step", f"step {i}", i, 1, None, []) for i in range(1, 4)]

    listed = _json(run_cli, env, "runs")
    assert [list(r) for r in listed] == [RUN_KEYS]
    assert listed[0] == {k: shown[k] for k in RUN_KEYS}

    text = cli_ok(env, "show", run_id).splitlines()
    assert text[:6] == [
        f"run       {run_id}",
        "workflow  demo.steps",
        "status    completed",
        f"input     {json.dumps(run_input, sort_keys=True)}",
        'output    {"steps": 3}',
        "steps     3",
    ]
    assert [line.split()[:4] for line in text[6:]] == [
        [str(i - 1), "step", "step", str(i)] for i in range(1, 4)
    ]
    [listing] = cli_ok(env, "runs").splitlines()
    assert listing.split()[:3] == [run_id, "completed", "demo.steps"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A database holding one completed demo.steps run: its path and the run's id."""
    directory = tmp_path_factory.mktemp("cli-errors")
    db = directory / "signoff.db"
    env = _env(db)
    run_id = cli_ok(
        env,
        "start",
        "demo.steps",
        "--input",
        json.dumps({"n": 1, "path": str(directory / "out.txt")}),
    ).strip()
    cli_ok(env, "worker", "--until-idle")
    assert _json(run_cli, env, "show", run_id)["status"] == "completed"
    return db, run_id


BAD_INPUT = [
    pytest.param(
        ["show", UNKNOWN_RUN, "--json"], {}, f"no run with id {UNKNOWN_RUN}", id="unknown-run"
    ),
    pytest.param(["cancel", UNKNOWN_RUN], {}, "no run with id", id="cancel-unknown-run"),
    pytest.param(["show", "not-a-run"], {}, "'not-a-run' is not a run id", id="malformed-run-id"),
    pytest.param(
        ["start", "demo.steps", "--input", "{bad"],
        {},
        "--input is not valid JSON",
        id="malformed-input-json",
    ),
    pytest.param(
        ["signal", "{run}", "go", "--data", "{bad"],
        {},
        "--data is not valid JSON",
        id="malformed-data-json",
    ),
    pytest.param(
        ["start", "demo.steps", "--input", "NaN"],
        {},
        "cannot be stored as JSON",
        id="input-not-storable",
    ),
    pytest.param(
        ["start", "no.such.workflow"],
        {},
        "unknown workflow 'no.such.workflow'",
        id="unknown-workflow",
    ),
    pytest.param(
        ["start", "demo.steps", "--input", '{"n": -1, "path": "x"}'],
        {},
        "n and delay_ms must be non-negative integers",
        id="demo-input-negative-n",
    ),
    pytest.param(
        ["cancel", "{run}"],
        {},
        "cannot cancel run {run}: it is completed",
        id="cancel-finished-run",
    ),
    pytest.param(
        ["resume", "{run}"],
        {},
        "cannot resume run {run}: it is completed",
        id="resume-completed-run",
    ),
    pytest.param(
        ["worker", "--until-idle"],
        {"SIGNOFF_LEASE_TTL_SECONDS": "soon"},
        "SIGNOFF_LEASE_TTL_SECONDS must be a number",
        id="bad-lease-ttl",
    ),
    pytest.param(
        ["show", "{run}"],
        {"SIGNOFF_WORKFLOWS": "tests.no_such_module:workflows"},
        "cannot import 'tests.no_such_module'",
        id="bad-workflow-module",
    ),
]


AS_PROCESS = {"unknown-run", "bad-lease-ttl"}
"""The cases run by a ``signoff`` process (a bad argument, bad settings); the others run in
the test's process."""


@pytest.mark.parametrize(("args", "extra_env", "expected"), BAD_INPUT)
def test_bad_input_is_a_one_line_error_that_changes_nothing(
    finished_run: tuple[Path, str],
    cli_here: InProcessCli,
    request: pytest.FixtureRequest,
    args: list[str],
    extra_env: dict[str, str],
    expected: str,
) -> None:
    """Bad input exits 2 with one `signoff: error:` line, no traceback, and no database change."""
    db, run_id = finished_run
    before = _snapshot(db)
    cli: Cli = run_cli if request.node.callspec.id in AS_PROCESS else cli_here
    done = cli(_env(db, extra=extra_env), *[a.replace("{run}", run_id) for a in args])
    _assert_user_error(done, expected.replace("{run}", run_id))
    assert _snapshot(db) == before


def test_cancel_a_waiting_run(tmp_path: Path, launcher: Launcher, cli_here: InProcessCli) -> None:
    """`signoff cancel` ends a waiting run for good: no worker or signal can move it again."""
    db, out = tmp_path / "signoff.db", tmp_path / "out.txt"
    env = _env(db)
    run_id = cli_here.ok(env, "start", "test.waiter", "--input", json.dumps({"path": str(out)}))
    run_id = run_id.strip()
    launcher.work(env, tmp_path)
    assert _status(db, run_id) == ("waiting", "go")

    cancelled = _json(run_cli, env, "cancel", run_id)
    assert (cancelled["status"], cancelled["wait_key"], cancelled["due_at"]) == (
        "cancelled",
        None,
        None,
    )
    _assert_user_error(
        run_cli(env, "signal", run_id, "go"), f"cannot signal run {run_id}: it is cancelled"
    )
    launcher.work(env, tmp_path)
    after = _json(cli_here, env, "show", run_id)
    assert after["status"] == "cancelled"
    assert [s["kind"] for s in after["steps"]] == ["step", "wait.deadline"]
    assert lines(out) == ["step 1"]


def test_signal_wakes_a_waiting_run(
    tmp_path: Path, launcher: Launcher, cli_here: InProcessCli
) -> None:
    """`signoff signal` delivers data once to a waiting run, which then completes with it."""
    db, out = tmp_path / "signoff.db", tmp_path / "out.txt"
    env = _env(db)
    run_id = cli_here.ok(env, "start", "test.waiter", "--input", json.dumps({"path": str(out)}))
    run_id = run_id.strip()
    launcher.work(env, tmp_path)
    assert _status(db, run_id) == ("waiting", "go")
    assert lines(out) == ["step 1"]

    woken = _json(run_cli, env, "signal", run_id, "go", "--data", '{"approved": true}')
    assert (woken["status"], woken["wait_key"]) == ("pending", None)
    _assert_user_error(
        run_cli(env, "signal", run_id, "go", "--data", "1"),
        f"event 'go' was already delivered to run {run_id}",
    )

    launcher.work(env, tmp_path)
    done = _json(cli_here, env, "show", run_id)
    assert (done["status"], done["output"]) == ("completed", {"got": {"approved": True}})
    assert [s["kind"] for s in done["steps"]] == ["step", "wait.deadline", "wait", "step"]
    assert done["steps"][2]["output"] == {"data": {"approved": True}}
    assert lines(out) == ["step 1", "step 2"]


def test_signal_with_a_key_the_run_does_not_wait_for_says_so(
    tmp_path: Path, launcher: Launcher, cli_here: InProcessCli
) -> None:
    """`signoff signal` with another key than the awaited one exits 1, naming the awaited key."""
    db, out = tmp_path / "signoff.db", tmp_path / "out.txt"
    env = _env(db)
    run_id = cli_here.ok(env, "start", "test.waiter", "--input", json.dumps({"path": str(out)}))
    run_id = run_id.strip()
    launcher.work(env, tmp_path)
    done = run_cli(env, "signal", run_id, "approved")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"run {run_id} waits for the event 'go', not 'approved'" in done.stderr
    assert _status(db, run_id) == ("waiting", "go")


def test_resume_a_failed_run_keeps_its_journal(
    tmp_path: Path, launcher: Launcher, cli_here: InProcessCli
) -> None:
    """`signoff resume` re-runs a failed run from its journal: step 1 is not executed again."""
    db, out, gate = tmp_path / "signoff.db", tmp_path / "out.txt", tmp_path / "gate"
    env = _env(db)
    run_input = json.dumps({"path": str(out), "gate": str(gate)})
    run_id = cli_here.ok(env, "start", "test.gated", "--input", run_input).strip()
    launcher.work(env, tmp_path)
    failed = _json(cli_here, env, "show", run_id)
    assert failed["status"] == "failed"
    assert failed["error"] == {"type": "RuntimeError", "message": "the gate is closed"}
    assert lines(out) == ["step 1"]

    gate.touch()
    resumed = _json(run_cli, env, "resume", run_id)
    assert (resumed["status"], resumed["error"]) == ("pending", None)
    launcher.work(env, tmp_path)
    done = _json(cli_here, env, "show", run_id)
    assert (done["status"], done["output"]) == ("completed", {"passed": True})
    assert [s["name"] for s in done["steps"]] == ["step 1", "step 2"]
    assert lines(out) == ["step 1", "step 2"]


def test_sigterm_finishes_the_step_and_releases_the_run(
    tmp_path: Path, cli_here: InProcessCli
) -> None:
    """SIGTERM mid-step: the worker ends the step, frees the run, exits 0; a new one resumes now."""
    db, out = tmp_path / "signoff.db", tmp_path / "out.txt"
    # A long lease: if the run were not released, no worker could take it for a minute.
    env = _env(db, lease_ttl=60.0)
    run_input = json.dumps({"path": str(out), "n": 2, "delay_ms": 800})
    run_id = cli_ok(env, "start", "test.slow", "--input", run_input).strip()
    with WorkerProcess(env, tmp_path / "worker.log") as worker:
        wait_until(
            lambda: lines(out) == ["begin 1"], timeout=20, what="step 1 to begin", alive=worker
        )
        stopped_at = datetime.now(UTC)
        assert worker.stop(timeout=STOPPED_S) == 0, worker.output()
        assert "Traceback" not in worker.output()
    assert lines(out) == ["begin 1", "end 1"], "the step in flight was finished, step 2 not begun"

    released = _json(cli_here, env, "show", run_id)
    assert (released["status"], released["lease_owner"]) == ("pending", None)
    assert [s["name"] for s in released["steps"]] == ["step 1"]
    assert released["due_at"] is not None
    assert datetime.fromisoformat(released["due_at"]) <= datetime.now(UTC)
    # when the worker released the run, as it recorded it: the step's end, not a lease lapsing
    released_at = datetime.fromisoformat(released["updated_at"])
    assert released_at - stopped_at < timedelta(seconds=RELEASED_S), "released at the step's end"

    resumed_at = time.monotonic()
    cli_ok(env, "worker", "--until-idle")
    assert time.monotonic() - resumed_at < STOPPED_S, "resumed at once, not when the lease ended"
    done = _json(cli_here, env, "show", run_id)
    assert done["status"] == "completed"
    assert lines(out) == ["begin 1", "end 1", "begin 2", "end 2"]


def test_graceful_stop_keeps_the_lease_until_the_step_ends(tmp_path: Path) -> None:
    """A worker stopping on SIGTERM keeps its lease alive, so no other worker re-runs its step."""
    db, out = tmp_path / "signoff.db", tmp_path / "out.txt"
    # A lease far shorter than the step, so that a worker no longer renewing it once stopping
    # would lose the run mid-step; long enough that a loaded machine's renewals keep it.
    env = _env(db, lease_ttl=1.0)
    run_input = json.dumps({"path": str(out), "n": 1, "delay_ms": 4000})
    run_id = cli_ok(env, "start", "test.slow", "--input", run_input).strip()
    with WorkerProcess(env, tmp_path / "a.log") as a, WorkerProcess(env, tmp_path / "b.log") as b:
        wait_until(lambda: lines(out) == ["begin 1"], timeout=20, what="step 1 to begin", alive=a)
        holder_pid = owner_pid(_lease_owner(db, run_id))
        stopping, other = (a, b) if holder_pid == a.pid else (b, a)
        assert holder_pid == stopping.pid
        stopping.process.send_signal(signal.SIGTERM)
        assert stopping.process.wait(timeout=20) == 0
        # The stopping worker finished (and completed) the run: nobody else began it.
        assert lines(out) == ["begin 1", "end 1"]
        assert other.stop() == 0


def test_db_upgrade_on_a_fresh_file(tmp_path: Path) -> None:
    """`signoff db upgrade` creates the schema at the head revision in a new file, saying so,
    and idempotently, saying there was nothing to do."""
    db = tmp_path / "fresh.db"
    env = _env(db)
    assert not db.exists()
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert cli_ok(env, "db", "upgrade") == f"database upgraded from an empty database to {head}\n"
    with closing(sqlite3.connect(db)) as conn:
        tables = _tables(conn)
        version = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert tables >= TABLES
    assert version == [(head,)]
    assert cli_ok(env, "db", "upgrade") == f"database is up to date (schema at {head})\n"


def test_unsupported_database_url_is_a_one_line_error(tmp_path: Path) -> None:
    """An unsupported SIGNOFF_DATABASE_URL is a user error: exit 2, one line, no traceback."""
    env = signoff_env("mysql://user@localhost/signoff")
    _assert_user_error(run_cli(env, "runs", cwd=tmp_path), "unsupported database 'mysql'")


def test_unreachable_database_is_a_one_line_error(tmp_path: Path) -> None:
    """A database that cannot be opened exits 1 with one `signoff: error:` line, no traceback."""
    env = signoff_env(f"sqlite:///{tmp_path / 'no-such-dir' / 'signoff.db'}")
    done = run_cli(env, "runs", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("signoff: error: ")
    assert done.stderr.count("\n") == 1, done.stderr
