"""Garbage collection in real ``signoff`` processes: a one-shot command (``approve``) runs
without an automatic collection, a long-lived one (``worker``) collects as Python always
does, and the command line called in a process that goes on gives collection back."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration import CLI_TIMEOUT_S, signoff_env
from tests.integration.agent_helpers import pending_refund

COUNTED = """
import gc, json, sys
out, mode, *args = sys.argv[1:]
from bot.cli.main import main
started = []
gc.callbacks.append(lambda phase, info: phase == "start" and started.append(info))
if mode == "script":
    sys.argv = ["signoff", *args]
status = main(None if mode == "script" else args)
during = len(started)
with open(out, "w", encoding="utf-8") as file:
    json.dump(
        {
            "status": status,
            "collections": during,
            "enabled": gc.isenabled(),
            "threshold": gc.get_threshold(),
        },
        file,
    )
"""
"""Run ``signoff ARGS`` (``python -c COUNTED OUT MODE ARGS...``) as the process's command
line (MODE ``script``, as the ``signoff`` script does) or with its arguments given (MODE
``call``), then write its exit status, the automatic collections ``main`` ran, and whether
automatic collection is on afterwards, with its thresholds, to OUT."""


@pytest.fixture
def world(tmp_path: Path) -> tuple[dict[str, str], str]:
    """A SQLite file with a demo-agent run waiting on a pending approval of its refund: the
    environment and the approval's id."""
    env = signoff_env(f"sqlite:///{tmp_path / 'signoff.db'}")
    _, approval_id = pending_refund(env)
    return env, approval_id


def counted(tmp_path: Path, env: dict[str, str], mode: str, *args: str) -> dict[str, Any]:
    """Run ``signoff args`` in a fresh Python (see ``COUNTED``); require exit status 0."""
    out = tmp_path / "counted.json"
    subprocess.run(
        [sys.executable, "-c", COUNTED, str(out), mode, *args],
        env=env,
        capture_output=True,
        timeout=CLI_TIMEOUT_S,
        check=True,
    )
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    assert report["status"] == 0, report
    return report


@pytest.mark.parametrize(("mode", "enabled_after"), [("script", False), ("call", True)])
def test_approve_decides_without_collecting(
    tmp_path: Path, world: tuple[dict[str, str], str], mode: str, enabled_after: bool
) -> None:
    """`approve` collects nothing; as the script it leaves collection off, called it restores it."""
    env, approval_id = world
    report = counted(tmp_path, env, mode, "approve", approval_id, "--as", "U_APPROVER")
    assert (report["collections"], report["enabled"]) == (0, enabled_after)
    assert tuple(report["threshold"]) == gc.get_threshold()


def test_a_worker_collects_as_python_does(
    tmp_path: Path, world: tuple[dict[str, str], str]
) -> None:
    """`signoff worker` runs with automatic collection on, at Python's thresholds."""
    env, _ = world
    report = counted(tmp_path, env, "script", "worker", "--until-idle")
    assert report["collections"] > 0
    assert report["enabled"] is True
    assert tuple(report["threshold"]) == gc.get_threshold()
