"""``signoff worker`` and ``signoff serve`` started before their database: each waits for it
(``SIGNOFF_STARTUP_DB_WAIT_SECONDS``), then serves and runs work without a restart; past the
bound it exits 1 saying why. The database is a real PostgreSQL server of the test's own,
stopped while the process starts and started once the process has failed to reach it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bot.app.processes import stop_process
from tests.integration import (
    WorkerProcess,
    bound_port,
    cli_ok,
    lines,
    run_cli,
    signoff_command,
    signoff_env,
    wait_until,
)
from tests.integration.ops_probes import probe
from tests.integration.private_postgres import PrivatePostgres

pytestmark = pytest.mark.postgres

TIMEOUT_S = 60.0
PASSWORD = "pg-startup-secret"
RETRY = "database unreachable at start"


def env_for(server: PrivatePostgres, wait_s: float) -> dict[str, str]:
    """The environment of a process on ``server``, with a password in its URL (the server
    trusts every local connection, so any password is accepted)."""
    url = server.url.replace("postgres@", f"postgres:{PASSWORD}@", 1)
    return signoff_env(url, extra={"SIGNOFF_STARTUP_DB_WAIT_SECONDS": str(wait_s)})


def ready(port: int) -> bool:
    """Tell whether the process on ``port`` answers ``/readyz`` with 200."""
    found = probe(port, "/readyz")
    return found is not None and found[0] == 200


def not_ready(port: int) -> bool:
    """Tell whether the process on ``port`` answers ``/readyz`` with 503, naming the
    database (it listens before it reaches the database)."""
    found = probe(port, "/readyz")
    return found is not None and found[0] == 503 and "database" in found[1]["failing"]


def completes_a_run(env: dict[str, str], tmp_path: Path, alive: WorkerProcess | None) -> None:
    """Start a two-step run and wait until the process under test has completed it."""
    effects = tmp_path / "effects.txt"
    run_id = cli_ok(
        env,
        "start",
        "test.slow",
        "--input",
        json.dumps({"n": 2, "delay_ms": 0, "path": str(effects)}),
    ).strip()

    def completed() -> bool:
        return bool(json.loads(cli_ok(env, "show", run_id, "--json"))["status"] == "completed")

    wait_until(completed, timeout=TIMEOUT_S, what="the run completed", alive=alive)
    assert lines(effects) == ["begin 1", "end 1", "begin 2", "end 2"]


def assert_logged_masked(log: str) -> None:
    """The log says, once per failed attempt, which database it tried, password masked."""
    assert log.count(RETRY) >= 2, log
    assert PASSWORD not in log
    assert "postgres:***@127.0.0.1" in log


def test_a_worker_started_before_its_database_waits_then_runs_work(
    tmp_path: Path, stopped_pg: PrivatePostgres
) -> None:
    """The worker keeps trying while the database is down (``/readyz`` 503 on its metrics
    port), then becomes ready and completes a run, the same process throughout."""
    env = env_for(stopped_pg, TIMEOUT_S)
    with WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", "0") as worker:
        port = worker.ops_port(TIMEOUT_S)
        wait_until(
            lambda: worker.output().count(RETRY) >= 2,
            timeout=TIMEOUT_S,
            what="two failed attempts",
            alive=worker,
        )
        assert not_ready(port)
        stopped_pg.start()
        wait_until(lambda: ready(port), timeout=TIMEOUT_S, what="/readyz 200", alive=worker)
        completes_a_run(env, tmp_path, worker)
        worker.assert_alive()
        assert_logged_masked(worker.output())


def test_serve_started_before_its_database_waits_then_serves_and_runs_work(
    tmp_path: Path, stopped_pg: PrivatePostgres
) -> None:
    """``signoff serve`` keeps trying while the database is down, then answers ``/readyz``
    and its worker completes a run, without a restart."""
    env = env_for(stopped_pg, TIMEOUT_S)
    log_path = tmp_path / "serve.log"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [*signoff_command(), "serve", "--no-http", "--metrics-port", "0"],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:

            def output() -> str:
                assert process.poll() is None, log_path.read_text()
                return log_path.read_text(encoding="utf-8", errors="replace")

            port = bound_port(log_path, "/", timeout=TIMEOUT_S, alive=output)

            wait_until(lambda: output().count(RETRY) >= 2, timeout=TIMEOUT_S, what="two tries")
            assert not_ready(port)
            stopped_pg.start()
            wait_until(lambda: output() and ready(port), timeout=TIMEOUT_S, what="/readyz 200")
            completes_a_run(env, tmp_path, None)
            assert process.poll() is None
            assert_logged_masked(output())
        finally:
            stop_process(process)


def test_a_worker_gives_up_after_the_bound_with_a_clear_error(
    tmp_path: Path, stopped_pg: PrivatePostgres
) -> None:
    """Past ``SIGNOFF_STARTUP_DB_WAIT_SECONDS`` the worker exits 1 naming the database (its
    password masked), the bound, and what the database last said."""
    done = run_cli(env_for(stopped_pg, 1.5), "worker", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"signoff: error: the database at postgresql+psycopg://postgres:***@127.0.0.1:"
        f"{stopped_pg.port}/postgres could not be reached within 1.5 s "
        "(SIGNOFF_STARTUP_DB_WAIT_SECONDS): connection failed"
    ), done.stderr
    assert done.stderr.count(RETRY) >= 2
    assert PASSWORD not in done.stderr


def test_a_password_given_as_a_query_parameter_is_masked_too(
    tmp_path: Path, stopped_pg: PrivatePostgres
) -> None:
    """libpq takes the password as ``?password=``: it is masked in the retries and the
    final error as the user-part form is (it was printed on every line)."""
    url = f"{stopped_pg.url}?password={PASSWORD}"
    env = signoff_env(url, extra={"SIGNOFF_STARTUP_DB_WAIT_SECONDS": "1.5"})
    done = run_cli(env, "worker", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count(RETRY) >= 2
    assert PASSWORD not in done.stderr
    assert f":{stopped_pg.port}/postgres?password=*** could not be reached" in done.stderr
