"""The chaos suite's kill points fire only where the chaos suite asks for them.

A kill point is armed by a file (``SIGNOFF_CHAOS_KILL_FILE``) naming a point the command
reaches: ``signoff runs`` lists runs through ``SqlStore.list_runs``. It fires only in
``python -m bench.kill_points --armed ...``; the ``signoff`` a user runs, the entry point
without ``--armed``, or armed without the file, list the runs and exit 0.
"""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bench.chaos_points import CATALOG, DECISION_COMMIT
from bench.kill_points import ARMED_FLAG, KILL_FILE_ENV, write_plan
from tests.integration import CLI_TIMEOUT_S, REPO_ROOT, signoff_command, signoff_env
from tests.integration.agent_helpers import pending_refund

POINT = "store:SqlStore.list_runs:before"
PRODUCTION_PACKAGES = ("agent_runtime", "store", "bot")


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` to completion with ``env``."""
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False
    )


def armed_env(tmp_path: Path, *, kill_file: bool = True, point: str = POINT) -> dict[str, str]:
    """A ``signoff`` environment on a SQLite file, with a kill file armed at ``point``."""
    env = signoff_env(f"sqlite:///{tmp_path / 'kill.db'}")
    plan = tmp_path / "kill.json"
    write_plan(plan, point)
    if kill_file:
        env[KILL_FILE_ENV] = str(plan)
    return env


def kill_points(*args: str) -> list[str]:
    """The chaos suite's command: ``python -m bench.kill_points ARGS``."""
    return [sys.executable, "-m", "bench.kill_points", *args]


def fired(tmp_path: Path) -> bool:
    """Tell whether a kill point fired (it leaves ``<kill file>.fired``)."""
    return (tmp_path / "kill.json.fired").exists()


def test_an_armed_point_kills_the_chaos_entry_point(tmp_path: Path) -> None:
    """With ``--armed`` and a kill file, the process SIGKILLs itself at the point."""
    done = run(kill_points(ARMED_FLAG, "runs"), armed_env(tmp_path))
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (tmp_path / "kill.json.fired").read_text(encoding="utf-8") == POINT


@pytest.mark.parametrize("point", CATALOG[DECISION_COMMIT])
def test_a_decision_reaches_the_decision_commit_points(tmp_path: Path, point: str) -> None:
    """``signoff approve`` dies at each point the chaos suite calls a decision's commit (a
    point no decision reaches would leave that fault class untried)."""
    env = armed_env(tmp_path, point=point)
    _, approval_id = pending_refund(env)
    done = run(kill_points(ARMED_FLAG, "approve", approval_id, "--as", "U_APPROVER"), env)
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    assert (tmp_path / "kill.json.fired").read_text(encoding="utf-8") == point


def test_the_signoff_command_ignores_a_kill_file(tmp_path: Path) -> None:
    """The ``signoff`` script users run lists runs and exits 0 with a kill file named."""
    done = run([*signoff_command(), "runs"], armed_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "no runs" in done.stdout
    assert not fired(tmp_path)


def test_the_entry_point_is_inert_without_its_flag(tmp_path: Path) -> None:
    """Without ``--armed`` first, the kill file changes nothing."""
    done = run(kill_points("runs"), armed_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert not fired(tmp_path)


def test_the_entry_point_is_inert_without_a_kill_file(tmp_path: Path) -> None:
    """With ``--armed`` but no kill file named, nothing is installed."""
    done = run(kill_points(ARMED_FLAG, "runs"), armed_env(tmp_path, kill_file=False))
    assert done.returncode == 0, done.stderr
    assert not fired(tmp_path)


def test_no_production_module_imports_the_benchmarks() -> None:
    """Nothing under agent_runtime/, store/ or bot/ imports ``bench``, which is not packaged."""
    importers = []
    for package in PRODUCTION_PACKAGES:
        for path in (REPO_ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                if any(n == "bench" or n.startswith("bench.") for n in names):
                    importers.append(str(path))
    assert importers == []
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packaged = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert not any(p.startswith("bench") for p in packaged)
