"""``--metrics-port``: ``signoff worker`` (and ``signoff serve --no-http``) as an
orchestrator runs them: probes, metrics, SIGTERM.

Each scenario runs a real subprocess on a SQLite file and reads its ``/healthz``,
``/readyz`` and ``/metrics`` over HTTP.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from sqlalchemy import text

from bot.app.processes import stop_process
from store import build_engine
from tests.integration import (
    WorkerProcess,
    bound_port,
    cli_ok,
    lines,
    signoff_command,
    signoff_env,
    wait_until,
)
from tests.integration.ops_probes import get, metrics, probe, sample

TIMEOUT_S = 30.0


def answering(worker: WorkerProcess, port: int, path: str, status: int) -> dict[str, Any]:
    """Wait until ``path`` answers ``status``; return its JSON body."""

    def check() -> dict[str, Any] | None:
        found = probe(port, path)
        return found[1] if found is not None and found[0] == status else None

    return wait_until(check, timeout=TIMEOUT_S, what=f"{path} answering {status}", alive=worker)


def test_worker_probes_and_metrics_then_sigterm_releases_its_step_for_another_worker(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    """The worker answers probes and metrics; SIGTERM mid-step exits 0 and the run resumes."""
    # steps long enough, and a lease long enough, that a loaded machine still sees one under way
    env = signoff_env(sqlite_url, lease_ttl=5.0)
    effects = tmp_path / "slow.txt"
    cli_ok(env, "db", "upgrade")
    with WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", "0") as worker:
        port = worker.ops_port()
        loops = {"loop:worker": "ok", "loop:approvals": "ok", "loop:webhooks": "ok"}
        ready = answering(worker, port, "/readyz", 200)["checks"]
        assert ready == {"database": "ok", "migrations": "ok", **loops}
        assert answering(worker, port, "/healthz", 200)["checks"] == loops
        run_id = cli_ok(
            env,
            "start",
            "test.slow",
            "--input",
            json.dumps({"n": 2, "delay_ms": 4000, "path": str(effects)}),
        ).strip()
        wait_until(
            lambda: lines(effects) == ["begin 1"],
            timeout=TIMEOUT_S,
            what="step 1 under way",
            alive=worker,
        )
        assert sample(metrics(port), "signoff_runs", status="running") == 1

        assert worker.stop(timeout=TIMEOUT_S) == 0, worker.output()

    assert lines(effects) == ["begin 1", "end 1"]
    assert json.loads(cli_ok(env, "show", run_id, "--json"))["status"] == "pending"
    cli_ok(env, "worker", "--until-idle")
    assert lines(effects) == ["begin 1", "end 1", "begin 2", "end 2"]


def test_readyz_fails_while_the_schema_is_behind_the_code(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    """/readyz answers 503 naming the migrations while the database is not at the newest."""
    env = signoff_env(sqlite_url)
    cli_ok(env, "db", "upgrade")
    with WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", "0") as worker:
        port = worker.ops_port()
        answering(worker, port, "/readyz", 200)
        engine = build_engine(sqlite_url)
        try:
            with engine.begin() as conn:
                conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
        finally:
            engine.dispose()

        body = answering(worker, port, "/readyz", 503)

        assert body["failing"] == ["migrations"], body
        assert answering(worker, port, "/healthz", 200)["status"] == "ok"


def test_a_drain_longer_than_its_timeout_ends_the_process_with_status_4(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    """SIGTERM during a step longer than SIGNOFF_DRAIN_SECONDS: the worker exits 4 on time."""
    env = signoff_env(sqlite_url, extra={"SIGNOFF_DRAIN_SECONDS": "0.5"})
    effects = tmp_path / "slow.txt"
    cli_ok(env, "db", "upgrade")
    with WorkerProcess(env, tmp_path / "worker.log") as worker:
        cli_ok(
            env,
            "start",
            "test.slow",
            "--input",
            json.dumps({"n": 1, "delay_ms": 60_000, "path": str(effects)}),
        )
        wait_until(
            lambda: lines(effects) == ["begin 1"],
            timeout=TIMEOUT_S,
            what="the long step under way",
            alive=worker,
        )

        assert worker.stop(timeout=TIMEOUT_S) == 4, worker.output()
        assert "draining took too long; exiting" in worker.output()


@dataclass
class Serving:
    """A ``signoff serve`` subprocess logging to a file, and its ports as it logged them."""

    process: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> None:
        """Fail, with its log, if the process has exited."""
        assert self.process.poll() is None, self.log.read_text()

    def port(self, path: str) -> int:
        """The port it logged for ``path`` (``/`` for its operator endpoints)."""
        return bound_port(self.log, path, timeout=TIMEOUT_S, alive=self.alive)

    def readiness(self, port: int) -> dict[str, Any]:
        """Wait until ``/readyz`` on ``port`` answers 200; return its body."""

        def ready() -> dict[str, Any] | None:
            self.alive()
            found = probe(port, "/readyz")
            return found[1] if found is not None and found[0] == 200 else None

        body: dict[str, Any] = wait_until(ready, timeout=TIMEOUT_S, what="/readyz")
        return body

    def stops_cleanly(self) -> None:
        """SIGTERM it: it exits 0."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=TIMEOUT_S) == 0


@contextmanager
def serving(env: dict[str, str], tmp_path: Path, *args: str) -> Iterator[Serving]:
    """``signoff serve ARGS`` for the block; stopped (SIGKILL past a grace) after it."""
    log_path = tmp_path / "serve.log"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [*signoff_command(), "serve", *args],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield Serving(process, log_path)
        finally:
            stop_process(process)


def test_serve_without_http_answers_probes_and_metrics_on_its_metrics_port(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    """``serve --no-http --metrics-port`` reports its worker and scheduler loops."""
    with serving(signoff_env(sqlite_url), tmp_path, "--no-http", "--metrics-port", "0") as serve:
        port = serve.port("/")
        assert set(serve.readiness(port)["checks"]) == {
            "database",
            "migrations",
            "loop:worker",
            "loop:dispatch",
            "loop:approvals",
            "loop:webhooks",
            "loop:intake",
        }
        assert sample(metrics(port), "signoff_database_up") == 1
        serve.stops_cleanly()


def test_serve_over_http_with_a_metrics_port_keeps_the_operator_endpoints_off_slacks_port(
    tmp_path: Path,
    sqlite_url: str,
) -> None:
    """``serve --metrics-port`` in HTTP mode answers the probes and metrics there, and no
    longer on ``SIGNOFF_PORT``, the port Slack reaches (the flag was ignored: they were only
    on the public port)."""
    secrets = {"SLACK_SIGNING_SECRET": "s" * 32, "SLACK_BOT_TOKEN": "xoxb-0", "SIGNOFF_PORT": "0"}
    env = signoff_env(sqlite_url, extra=secrets)
    with serving(env, tmp_path, "--no-worker", "--metrics-port", "0") as serve:
        ops, public = serve.port("/"), serve.port("/slack/events")
        assert ops != public
        assert serve.readiness(ops)["status"] == "ok"
        assert sample(metrics(ops), "signoff_database_up") == 1
        for path in ("/readyz", "/healthz", "/metrics"):
            assert get(public, path).status_code == 404, path
        with requests.Session() as session:
            session.trust_env = False  # no proxy
            unsigned = session.post(f"http://127.0.0.1:{public}/slack/events", data=b"{}")
        assert unsigned.status_code == 401  # Slack's front is there, verifying signatures
        serve.stops_cleanly()
