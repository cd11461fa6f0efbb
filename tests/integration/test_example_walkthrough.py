"""The refund workflow example, driven from the command line as its walkthrough shows."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration import cli_ok, signoff_env

EXAMPLE = "examples.approval_workflow:workflows"


def test_the_workflow_walkthrough(tmp_path: Path) -> None:
    """start, worker, signal approval, worker: the run refunds and sleeps its durable day."""
    env = signoff_env(f"sqlite:///{tmp_path / 'signoff.db'}", extra={"SIGNOFF_WORKFLOWS": EXAMPLE})
    run_id = cli_ok(env, "start", "refunds.issue", "--input", '{"id": "1042"}').strip()
    cli_ok(env, "worker", "--until-idle")
    shown = json.loads(cli_ok(env, "show", run_id, "--json"))
    assert (shown["status"], shown["wait_key"]) == ("waiting", "approval")
    cli_ok(env, "signal", run_id, "approval", "--data", '{"by": "dana"}')
    cli_ok(env, "worker", "--until-idle")
    shown = json.loads(cli_ok(env, "show", run_id, "--json"))
    assert shown["status"] == "waiting"
    assert [s["kind"] for s in shown["steps"]][-2:] == ["step", "sleep"]
