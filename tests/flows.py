"""Workflows for the integration tests, loaded by worker subprocesses.

A worker started with ``SIGNOFF_WORKFLOWS=tests.flows:workflows`` (and the repository root
on ``PYTHONPATH``) can run these next to the built-in ``demo.*`` workflows. Every step
appends one line to a file: the tests count those lines as the external effect.

Crash point "after a step ran, before its journal entry committed": when the worker's
environment has ``SIGNOFF_TEST_HANG_BEFORE_COMMIT_AT=<position>``, importing this module
wraps the store's journal append so that, right before the entry for that position is
written, it creates the file named by ``SIGNOFF_TEST_HANG_MARKER`` and then blocks forever:
a SIGKILL then lands after the step's function ran and before its commit.

Loop faults: with ``SIGNOFF_TEST_CLAIM_FAULT=raise|hang`` and
``SIGNOFF_TEST_CLAIM_FAULT_FILE=<path>``, the worker's claim fails or blocks while that file
exists. Without these variables the module changes nothing, so importing it (as the tests
do) is harmless.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from agent_runtime import NO_RETRY, Lease, RetryPolicy, RunContext, StepRecord, Workflows
from store import SqlStore

HANG_AT_ENV = "SIGNOFF_TEST_HANG_BEFORE_COMMIT_AT"
HANG_MARKER_ENV = "SIGNOFF_TEST_HANG_MARKER"
CLAIM_FAULT_ENV = "SIGNOFF_TEST_CLAIM_FAULT"
"""``raise`` or ``hang``: what the store's claim of runs does while the switch file exists."""
CLAIM_FAULT_FILE_ENV = "SIGNOFF_TEST_CLAIM_FAULT_FILE"
HOLD_RUN_CREATION_ENV = "SIGNOFF_TEST_HOLD_RUN_CREATION"
"""A file: while it exists, creating a run blocks for good (a process stuck after its ack)."""

workflows = Workflows()


def append(path: str, line: str) -> str:
    """Append ``line`` to the file at ``path`` and make it durable; return the line."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return line


def _path(input: Any) -> str:
    if not isinstance(input, dict) or not isinstance(input.get("path"), str):
        raise ValueError('needs input like {"path": "out.txt"}')
    path: str = input["path"]
    return path


@workflows.register("test.sleepy", validate=_path)
def sleepy(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """Step 1, a durable sleep of ``seconds``, step 2."""
    path = _path(input)
    ctx.step(append, path, "step 1", name="step 1")
    ctx.sleep(timedelta(seconds=float(input.get("seconds", 1.0))))
    ctx.step(append, path, "step 2", name="step 2")
    return {"slept": True}


@workflows.register("test.waiter", validate=_path)
def waiter(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """Step 1, a durable wait for the event ``go``, step 2; returns the event's data."""
    path = _path(input)
    ctx.step(append, path, "step 1", name="step 1")
    data = ctx.wait_for("go")
    ctx.step(append, path, "step 2", name="step 2")
    return {"got": data}


@workflows.register("test.gated", validate=_path)
def gated(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """Step 1, then fail (outside any step) unless the file ``gate`` exists, then step 2.

    Models a workflow whose code is fixed after it failed: ``signoff resume`` must replay
    step 1 from the journal and only run step 2 live.
    """
    path = _path(input)
    ctx.step(append, path, "step 1", name="step 1", retry=NO_RETRY)
    if not Path(str(input["gate"])).exists():
        raise RuntimeError("the gate is closed")
    ctx.step(append, path, "step 2", name="step 2", retry=NO_RETRY)
    return {"passed": True}


def fail_first(path: str, failures: int) -> int:
    """Append ``attempt <n>`` to the file; fail while ``n`` is at most ``failures``."""
    done = Path(path).read_text(encoding="utf-8").splitlines() if Path(path).exists() else []
    number = len(done) + 1
    append(path, f"attempt {number}")
    if number <= failures:
        raise RuntimeError(f"attempt {number} fails")
    return number


@workflows.register("test.retried", validate=_path)
def retried(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """One step that fails on its first ``failures`` attempts, retried every ``retry_s``
    seconds with three attempts in all."""
    policy = RetryPolicy(
        max_attempts=3,
        backoff=1,
        initial_interval=timedelta(seconds=float(input.get("retry_s", 1.0))),
    )
    failures = int(input.get("failures", 1))
    return {"attempt": ctx.step(fail_first, _path(input), failures, name="flaky", retry=policy)}


def begin_and_end(path: str, index: int, delay_ms: int) -> int:
    """Append ``begin <index>``, sleep ``delay_ms``, append ``end <index>``."""
    append(path, f"begin {index}")
    time.sleep(delay_ms / 1000)
    append(path, f"end {index}")
    return index


@workflows.register("test.slow", validate=_path)
def slow(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """``n`` long steps; each marks its start and its end in the file."""
    path = _path(input)
    n, delay_ms = int(input.get("n", 2)), int(input.get("delay_ms", 1000))
    for index in range(1, n + 1):
        ctx.step(begin_and_end, path, index, delay_ms, name=f"step {index}")
    return {"steps": n}


def held_step(path: str, index: int, gate: str) -> str:
    """From step 2 on, wait until the file ``gate`` exists; then append ``step <index>``."""
    while index > 1 and not Path(gate).exists():
        time.sleep(0.02)
    return append(path, f"step {index}")


@workflows.register("test.held", validate=_path)
def held(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """``n`` steps; each after the first waits for the file ``gate`` before its effect, so a
    test can kill a worker while it holds the run with exactly one step committed."""
    path, n = _path(input), int(input.get("n", 3))
    for index in range(1, n + 1):
        ctx.step(held_step, path, index, str(input["gate"]), name=f"step {index}")
    return {"steps": n}


def _hang(position: int) -> None:
    """Announce through the marker file that the hang point is reached, then block forever."""
    marker = os.environ.get(HANG_MARKER_ENV)
    if marker:
        partial = Path(marker + ".partial")
        partial.write_text(json.dumps({"position": position, "pid": os.getpid()}))
        partial.replace(marker)  # appears whole or not at all
    threading.Event().wait()  # until SIGKILL


def _install_hang_before_commit(position: int) -> None:
    """Make the journal append of ``position`` block before it reaches the database.

    Hooked at ``SqlStore.append_step`` -- the Store contract's journal write, which commits
    the entry in its own transaction -- rather than at the SQL level, so the crash point
    stays exact however the store spells the statement (it bypasses SQLAlchemy's
    execution events on its hot path).
    """
    original = SqlStore.append_step

    def append_step(self: SqlStore, lease: Lease, step: StepRecord, *more: Any, **kw: Any) -> None:
        if step.position == position:
            _hang(position)
        original(self, lease, step, *more, **kw)

    SqlStore.append_step = append_step  # type: ignore[method-assign]


def _install_claim_fault(kind: str, switch: Path) -> None:
    """While ``switch`` exists, make the worker loop's claim raise a bug-like error (``raise``)
    or block for good (``hang``): a loop that meets a surprise, or one that is stuck."""
    original = SqlStore.claim_runs

    def claim_runs(self: SqlStore, *args: Any, **kw: Any) -> Any:
        if switch.exists():
            if kind == "hang":
                threading.Event().wait()
            raise RuntimeError("injected claim failure")
        return original(self, *args, **kw)

    SqlStore.claim_runs = claim_runs  # type: ignore[method-assign]


def held_run_creation(switch: Path) -> Path:
    """The file a run creation held by ``switch`` makes once it is held."""
    return switch.with_name(f"{switch.name}.held")


def _install_run_creation_hold(switch: Path) -> None:
    """While ``switch`` exists, make creating a run wait (first making
    ``held_run_creation(switch)``)."""
    original = SqlStore.create_run

    def create_run(self: SqlStore, *args: Any, **kw: Any) -> Any:
        if switch.exists():
            held_run_creation(switch).touch()
            while switch.exists():
                time.sleep(0.02)
        return original(self, *args, **kw)

    SqlStore.create_run = create_run  # type: ignore[method-assign]


_hold_creation = os.environ.get(HOLD_RUN_CREATION_ENV)
if _hold_creation:
    _install_run_creation_hold(Path(_hold_creation))

_claim_fault = os.environ.get(CLAIM_FAULT_ENV)
if _claim_fault:
    _install_claim_fault(_claim_fault, Path(os.environ[CLAIM_FAULT_FILE_ENV]))

_hang_setting = os.environ.get(HANG_AT_ENV)
if _hang_setting:
    _install_hang_before_commit(int(_hang_setting))
