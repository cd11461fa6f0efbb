"""``signoff serve`` as an orchestrator runs it: probes, metrics, JSON logs, stuck loops,
SIGTERM.

Each scenario starts real ``signoff serve`` subprocesses through the harness of
``test_serve_instances`` (PostgreSQL, the sandbox Slack Web API, the demo provider) and
reads what an operator would: ``/readyz``, ``/metrics``, the log, the exit status.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent_runtime import RunId, RunStatus
from bot.slack.notifier import root_key
from devkit.sandbox.slack_api import DEFAULT_TOKEN
from store import models
from tests.flows import CLAIM_FAULT_ENV, CLAIM_FAULT_FILE_ENV
from tests.integration import expected_steps, lines
from tests.integration.in_process import InProcessCli
from tests.integration.ops_probes import metrics, probe, sample
from tests.integration.serve_cluster import (
    Cluster,
    ServeProcess,
    acked,
    approve_in_turn,
)
from tests.integration.slack_harness import (
    SIGNING_SECRET,
    TASK,
)
from tests.integration.slack_readers import run_id_of

pytestmark = pytest.mark.postgres


EXIT_TIMEOUT_S = 30.0
AUDIT_SECRET = "audit-secret-0123456789abcdef"
MODEL_KEY = "sk-test-model-key-4242424242"
APP_TOKEN = "xapp-1-A000-test-app-token"
LOOPS = ("loop:worker", "loop:dispatch", "loop:approvals")


def start(cluster: Cluster, name: str, **extra: str) -> ServeProcess:
    """Start one ``signoff serve`` with extra environment and wait until it is healthy."""
    process = ServeProcess(cluster.world, name, cluster.reader, {**cluster.env, **extra})
    cluster.processes.append(process)
    process.wait_healthy()
    return process


def readiness(
    cluster: Cluster, process: ServeProcess, status: int, failing: str | None = None
) -> dict[str, Any]:
    """Wait until ``/readyz`` answers ``status`` (naming ``failing``); return its body."""

    def check() -> dict[str, Any] | None:
        found = probe(process.port, "/readyz")
        if found is None or found[0] != status:
            return None
        return found[1] if failing is None or failing in found[1]["failing"] else None

    return cluster.wait(check, what=f"/readyz answering {status}")


def exit_code(process: ServeProcess) -> int:
    """Wait for the process to exit; return its status."""
    return process.process.wait(timeout=EXIT_TIMEOUT_S)


def test_readyz_and_metrics_report_the_database_the_loops_and_a_whole_flow(
    cluster: Cluster,
) -> None:
    """/readyz names each check; /metrics counts runs, decisions, notices and Slack's refusals."""
    world = cluster.world
    a = start(cluster, "A")
    body = readiness(cluster, a, 200)
    assert (body["status"], body["failing"]) == ("ok", [])
    assert {k: body["checks"][k] for k in ("database", "migrations", *LOOPS)} == dict.fromkeys(
        ("database", "migrations", *LOOPS), "ok"
    )
    world.workspace.rate_limit("chat.postMessage", times=1)
    world.workspace.fail("chat.postMessage", "internal_error", times=1)

    run_id = run_id_of(acked(a.command(TASK)))
    approve_in_turn(a, cluster, run_id)
    cluster.completed(run_id)

    found = metrics(a.port)
    assert sample(found, "signoff_database_up") == 1
    assert sample(found, "signoff_runs", status="completed") == 1
    assert sample(found, "signoff_runs", status="running") == 0
    assert sample(found, "signoff_approval_decisions_total", outcome="approved") == 2
    assert sample(found, "signoff_approval_decisions_total", outcome="stale") == 0
    assert sample(found, "signoff_approvals_pending") == 0
    assert sample(found, "signoff_outbox_notices", status="pending") == 0
    assert sample(found, "signoff_outbox_notices", status="dead") == 0
    assert sample(found, "signoff_outbox_delivery_lag_seconds") == 0
    assert (
        sample(
            found, "signoff_slack_api_errors_total", method="chat.postMessage", error="ratelimited"
        )
        == 1
    )
    assert (
        sample(
            found,
            "signoff_slack_api_errors_total",
            method="chat.postMessage",
            error="internal_error",
        )
        == 1
    )
    assert sample(found, "signoff_slack_rate_limited_total", method="chat.postMessage") == 1
    assert (sample(found, "signoff_steps_committed_total", kind="step") or 0) > 0
    assert (sample(found, "signoff_step_duration_seconds_count", kind="step") or 0) > 0
    assert (sample(found, "signoff_model_tokens_total", direction="input") or 0) > 0
    assert (sample(found, "signoff_model_tokens_total", direction="output") or 0) > 0
    assert (sample(found, "signoff_model_cost_usd_total") or 0) > 0
    assert sample(found, "signoff_runs_lease_expired") == 0
    for loop in ("worker", "dispatch", "approvals"):
        tick = sample(found, "signoff_loop_last_tick_timestamp_seconds", loop=loop)
        assert abs(time.time() - (tick or 0)) < 30, (loop, tick)


def test_json_logs_of_a_slack_flow_parse_and_never_show_a_secret(cluster: Cluster) -> None:
    """With SIGNOFF_LOG_FORMAT=json every line is a JSON record and no secret appears."""
    world = cluster.world
    a = start(
        cluster,
        "A",
        SIGNOFF_LOG_FORMAT="json",
        SIGNOFF_AUDIT_KEYS=f"k1:{AUDIT_SECRET}",
        SIGNOFF_MODEL_API_KEY=MODEL_KEY,
        SLACK_APP_TOKEN=APP_TOKEN,
    )
    world.workspace.fail("chat.postMessage", "internal_error", times=1)  # a warning with run_id

    run_id = run_id_of(acked(a.command(TASK)))
    approve_in_turn(a, cluster, run_id)
    cluster.completed(run_id)
    a.process.send_signal(signal.SIGTERM)
    assert exit_code(a) == 0

    logged = [line for line in a.log.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert logged
    for secret in (DEFAULT_TOKEN, SIGNING_SECRET, AUDIT_SECRET, MODEL_KEY, APP_TOKEN):
        assert not [line for line in logged if secret in line], secret
    records = [json.loads(line) for line in logged]
    assert all({"timestamp", "level", "logger", "message"} <= set(r) for r in records)
    assert any(r.get("run_id") == run_id and r.get("action") == "dispatch" for r in records)
    assert any(r["message"] == "drained" for r in records)


def test_a_stuck_worker_loop_fails_readyz_then_ends_the_process(
    cluster: Cluster,
    tmp_path: Path,
) -> None:
    """A worker loop that stops going round: /readyz names it, then the process exits 3."""
    switch = tmp_path / "hang-claims"
    a = start(
        cluster,
        "A",
        SIGNOFF_LOOP_STALL_SECONDS="1",
        SIGNOFF_LOOP_EXIT_SECONDS="4",
        **{CLAIM_FAULT_ENV: "hang", CLAIM_FAULT_FILE_ENV: str(switch)},
    )
    readiness(cluster, a, 200)

    switch.touch()
    body = readiness(cluster, a, 503, failing="loop:worker")

    assert body["status"] == "fail"
    assert body["checks"]["loop:worker"].startswith("silent for ")
    assert body["checks"]["database"] == "ok"
    assert exit_code(a) == 3, a.output()
    assert "loops stopped going round; exiting" in a.output()


def test_an_unexpected_error_in_the_worker_loop_is_logged_and_the_loop_goes_on(
    cluster: Cluster,
    tmp_path: Path,
    cli_here: InProcessCli,
) -> None:
    """A surprise in the claim loop is logged with its traceback; the worker then runs a run."""
    switch = tmp_path / "fail-claims"
    switch.touch()
    a = start(cluster, "A", **{CLAIM_FAULT_ENV: "raise", CLAIM_FAULT_FILE_ENV: str(switch)})
    cluster.wait(
        lambda: (
            "RuntimeError: injected claim failure" in a.output()
            and "worker round failed" in a.output()
        ),
        what="the failure logged",
    )
    assert "Traceback" in a.output()

    switch.unlink()
    effects = tmp_path / "steps.txt"
    run_id = start_run(
        cli_here, cluster, "demo.steps", {"n": 2, "delay_ms": 10, "path": str(effects)}
    )
    cluster.wait(lambda: cluster.status(run_id) == RunStatus.COMPLETED, what="the run done")
    assert lines(effects) == expected_steps(2)
    a.assert_alive()


def test_sigterm_lets_the_step_in_flight_finish_and_the_run_resume_elsewhere(
    cluster: Cluster,
    tmp_path: Path,
    cli_here: InProcessCli,
) -> None:
    """SIGTERM mid-step: exit 0, the step completes and commits, the run is released, B ends it."""
    a = start(cluster, "A")
    effects = tmp_path / "slow.txt"
    run_id = start_run(
        cli_here, cluster, "test.slow", {"n": 2, "delay_ms": 1500, "path": str(effects)}
    )
    cluster.wait(lambda: lines(effects) == ["begin 1"], what="step 1 under way")

    a.process.send_signal(signal.SIGTERM)

    assert exit_code(a) == 0, a.output()
    assert lines(effects) == ["begin 1", "end 1"]
    with cluster.reader.store.engine.connect() as conn:
        status, owner = conn.execute(
            select(models.runs.c.status, models.runs.c.lease_owner).where(
                models.runs.c.id == run_id
            )
        ).one()
        journal = (
            conn.execute(select(models.steps.c.name).where(models.steps.c.run_id == run_id))
            .scalars()
            .all()
        )
    assert (status, owner, list(journal)) == ("pending", None, ["step 1"])
    start(cluster, "B")
    cluster.wait(lambda: cluster.status(run_id) == RunStatus.COMPLETED, what="B to finish it")
    assert lines(effects) == ["begin 1", "end 1", "begin 2", "end 2"]


def test_sigterm_waits_for_the_slack_call_in_flight_and_records_it(cluster: Cluster) -> None:
    """SIGTERM while a post is in flight: the process records the delivery, then exits 0."""
    world = cluster.world
    a = start(cluster, "A")
    world.workspace.hold_answers("chat.postMessage")
    run_id = run_id_of(acked(a.command(TASK)))
    cluster.wait(lambda: world.workspace.calls("chat.postMessage"), what="a post in flight")

    a.process.send_signal(signal.SIGTERM)
    cluster.wait(
        lambda: "draining" in a.output() or a.process.poll() is not None, what="the drain to begin"
    )
    world.workspace.release_answers("chat.postMessage")

    assert exit_code(a) == 0, a.output()
    with cluster.reader.store.engine.connect() as conn:
        root = conn.execute(
            select(models.outbox.c.status, models.outbox.c.sending_at).where(
                models.outbox.c.key == root_key(run_id)
            )
        ).one()
    assert (root.status, root.sending_at) == ("sent", None)


def start_run(cli: InProcessCli, cluster: Cluster, workflow: str, data: dict[str, Any]) -> RunId:
    """Start a run with the command line (in this process); return its id."""
    return RunId(cli.ok(cluster.env, "start", workflow, "--input", json.dumps(data)).strip())
