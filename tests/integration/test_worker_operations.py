"""``signoff worker --metrics-port`` as an orchestrator runs it: probes, metrics, SIGTERM.

Each scenario runs a real ``signoff worker`` subprocess on a SQLite file and reads its
``/healthz``, ``/readyz`` and ``/metrics`` over HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import text

from store import build_engine
from tests.integration import WorkerProcess, cli_ok, lines, signoff_env, wait_until
from tests.integration.ops_probes import metrics, probe, sample
from tests.integration.test_serve_instances import free_port

TIMEOUT_S = 30.0


def answering(worker: WorkerProcess, port: int, path: str, status: int) -> dict[str, Any]:
    """Wait until ``path`` answers ``status``; return its JSON body."""
    def check() -> dict[str, Any] | None:
        found = probe(port, path)
        return found[1] if found is not None and found[0] == status else None

    return wait_until(check, timeout=TIMEOUT_S, what=f"{path} answering {status}", alive=worker)


def test_worker_probes_and_metrics_then_sigterm_releases_its_step_for_another_worker(
    tmp_path: Path, sqlite_url: str,
) -> None:
    """The worker answers probes and metrics; SIGTERM mid-step exits 0 and the run resumes."""
    env, port, effects = signoff_env(sqlite_url), free_port(), tmp_path / "slow.txt"
    cli_ok(env, "db", "upgrade")
    with WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", str(port)) as worker:
        assert answering(worker, port, "/healthz", 200)["checks"] == {"loop:worker": "ok"}
        ready = answering(worker, port, "/readyz", 200)["checks"]
        assert ready == {"database": "ok", "migrations": "ok", "loop:worker": "ok"}
        run_id = cli_ok(env, "start", "test.slow", "--input", json.dumps(
            {"n": 2, "delay_ms": 1500, "path": str(effects)})).strip()
        wait_until(lambda: lines(effects) == ["begin 1"], timeout=TIMEOUT_S,
                   what="step 1 under way", alive=worker)
        assert sample(metrics(port), "signoff_runs", status="running") == 1

        assert worker.stop(timeout=TIMEOUT_S) == 0, worker.output()

    assert lines(effects) == ["begin 1", "end 1"]
    assert json.loads(cli_ok(env, "show", run_id, "--json"))["status"] == "pending"
    cli_ok(env, "worker", "--until-idle")
    assert lines(effects) == ["begin 1", "end 1", "begin 2", "end 2"]


def test_readyz_fails_while_the_schema_is_behind_the_code(
    tmp_path: Path, sqlite_url: str,
) -> None:
    """/readyz answers 503 naming the migrations while the database is not at the newest."""
    env, port = signoff_env(sqlite_url), free_port()
    cli_ok(env, "db", "upgrade")
    with WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", str(port)) as worker:
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
