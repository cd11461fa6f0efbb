"""The command line imports only what a command uses (what makes ``signoff`` start fast):
each command runs in a fresh Python, which then reports every module it imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration import CLI_TIMEOUT_S, signoff_env
from tests.integration.agent_helpers import pending_refund

IMPORTED_BY = """
import json, sys
from bot.cli.main import main
try:
    status = main(sys.argv[2:])
except SystemExit as exit_:
    status = exit_.code
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump({"status": status, "modules": sorted(sys.modules)}, out)
"""
"""Run ``signoff ARGS`` (``python -c IMPORTED_BY OUT ARGS...``), then write its exit status
and the modules loaded to OUT."""

HEAVY = (
    "alembic",
    "apscheduler",
    "google.protobuf",
    "jsonschema",
    "langgraph",
    "mcp",
    "opentelemetry",
    "prometheus_client",
    "slack_bolt",
    "slack_sdk",
    "sqlalchemy.orm",
)
"""What a command that reads or decides (``runs``, ``show``, ``approve``) has no use for:
Slack, tracing, the scheduler, metrics, migrations, the MCP SDK, JSON Schema (tools are
validated when called), and SQLAlchemy's ORM (the store speaks SQL)."""

ON_SQLITE = ("psycopg", "sqlalchemy.dialects.postgresql")
"""What a command on a SQLite database has no use for: PostgreSQL's driver and SQLAlchemy's
dialect of it (whose import alone costs a short command a tenth of its time)."""

LISTING_RUNS = (
    "agent_runtime.agent_loop",
    "agent_runtime.approval_service",
    "agent_runtime.worker",
    "bench.cli_agent",
    "bot.api",
    "bot.app.assembly",
    "bot.cli.agents",
    "bot.cli.grants",
    "bot.cli.mcp_proxy",
    "bot.cli.rules",
    "bot.mcp",
    "bot.slack.notifier",
    "devkit",
    "store.approval_store",
)
"""What listing runs has no use for beyond ``HEAVY``: the agents (the configured one's module
included), the approvals service and its store, the notices of Slack and of the approvals
API, the worker and the agent loop, and the other commands' modules."""


DECIDING = (
    "agent_runtime.agent_loop",
    "agent_runtime.grant_service",
    "agent_runtime.runtime",
    "agent_runtime.worker",
    "concurrent.futures.thread",
)
"""What deciding an approval has no use for beyond ``HEAVY``: the runtime, made when first
used, and its worker's modules (a decision's wake-up is written by the approvals' store),
the agent loop, imported when a run first executes, and the grants, made when first used."""


@pytest.fixture
def world(tmp_path: Path) -> tuple[dict[str, str], str, str]:
    """A SQLite file with a demo-agent run waiting on a pending approval of its refund:
    the environment, the run's id and the approval's id."""
    env = signoff_env(f"sqlite:///{tmp_path / 'signoff.db'}")
    run_id, approval_id = pending_refund(env)
    return env, run_id, approval_id


def imported(tmp_path: Path, env: dict[str, str], *args: str) -> set[str]:
    """Run ``signoff args`` in a fresh Python; require exit status 0; return what it imported."""
    out = tmp_path / "imported.json"
    subprocess.run(
        [sys.executable, "-c", IMPORTED_BY, str(out), *args],
        env=env,
        capture_output=True,
        timeout=CLI_TIMEOUT_S,
        check=True,
    )
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["status"] == 0, report["status"]
    return set(report["modules"])


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The ``packages`` (or modules) of which ``modules`` holds the package or a module."""
    return [p for p in packages if any(m == p or m.startswith(f"{p}.") for m in modules)]


@pytest.mark.parametrize("command", ["runs", "show", "approve"])
def test_reading_and_deciding_import_nothing_they_do_not_use(
    tmp_path: Path, world: tuple[dict[str, str], str, str], command: str
) -> None:
    """`signoff runs`, `show RUN` and `approve ID` on SQLite load no Slack, tracing, ORM,
    schema or PostgreSQL code."""
    env, run_id, approval_id = world
    args = {
        "runs": ["runs"],
        "show": ["show", run_id],
        "approve": ["approve", approval_id, "--as", "U_APPROVER"],
    }[command]
    assert loaded(imported(tmp_path, env, *args), (*HEAVY, *ON_SQLITE)) == []


def test_listing_runs_builds_no_agent_and_no_service(
    tmp_path: Path, world: tuple[dict[str, str], str, str]
) -> None:
    """`signoff runs` reads the runs' store alone: the agents, the approvals service, the
    notifiers and the worker are neither built nor imported."""
    env, _, _ = world
    env = env | {"SIGNOFF_AGENT": "bench.cli_agent:agent"}
    assert loaded(imported(tmp_path, env, "runs"), (*HEAVY, *ON_SQLITE, *LISTING_RUNS)) == []


def test_deciding_builds_no_runtime(tmp_path: Path, world: tuple[dict[str, str], str, str]) -> None:
    """`signoff approve ID` builds no runtime or grants and imports no worker or agent loop."""
    env, _, approval_id = world
    modules = imported(tmp_path, env, "approve", approval_id, "--as", "U_APPROVER")
    assert loaded(modules, DECIDING) == []


@pytest.mark.parametrize("args", [["--help"], ["worker", "--help"], ["approve", "--help"]])
def test_help_imports_no_sqlalchemy(
    tmp_path: Path, world: tuple[dict[str, str], str, str], args: list[str]
) -> None:
    """`signoff --help` and a command's `--help` build the parser alone: no SQLAlchemy at all."""
    env, _, _ = world
    assert loaded(imported(tmp_path, env, *args), ("sqlalchemy", *HEAVY)) == []
