"""How runs and journals look on the command line: a stable JSON form and a human form."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agent_runtime import AttemptRecord, ErrorInfo, Run, StepRecord


def run_json(run: Run) -> dict[str, Any]:
    """Return the stable JSON form of a run."""
    return {
        "id": run.id,
        "workflow": run.workflow,
        "status": run.status.value,
        "input": run.input,
        "output": run.output,
        "error": _error(run.error),
        "created_at": _time(run.created_at),
        "updated_at": _time(run.updated_at),
        "due_at": _time(run.due_at),
        "wait_key": run.wait_key,
        "lease_owner": run.lease_owner,
    }


def step_json(step: StepRecord, attempts: list[AttemptRecord]) -> dict[str, Any]:
    """Return the stable JSON form of a journal entry and its failed attempts."""
    return {
        "position": step.position,
        "kind": step.kind.value,
        "name": step.name,
        "input_hash": step.input_hash,
        "attempts": step.attempts,
        "started_at": _time(step.started_at),
        "finished_at": _time(step.finished_at),
        "output": step.output,
        "error": _error(step.error),
        "failed_attempts": [
            {"attempt": a.attempt, "at": _time(a.at), "error": _error(a.error)} for a in attempts
        ],
    }


def run_line(run: Run) -> str:
    """Return one line describing a run, for listings."""
    return f"{run.id}  {run.status.value:<9}  {run.workflow:<24}  {_short(run.created_at)}"


def run_detail(run: Run, steps: list[StepRecord], attempts: list[AttemptRecord]) -> str:
    """Return a run and its journal as readable text."""
    lines = [
        f"run       {run.id}",
        f"workflow  {run.workflow}",
        f"status    {run.status.value}{_waiting(run)}",
        f"input     {_compact(run.input)}",
    ]
    if run.output is not None:
        lines.append(f"output    {_compact(run.output)}")
    if run.error is not None:
        lines.append(f"error     {run.error.type}: {run.error.message}")
    lines.append(f"steps     {len(steps)}")
    by_position: dict[int, list[AttemptRecord]] = {}
    for attempt in attempts:
        by_position.setdefault(attempt.position, []).append(attempt)
    lines += [_step_line(s, by_position.get(s.position, [])) for s in steps]
    return "\n".join(lines)


def _step_line(step: StepRecord, attempts: list[AttemptRecord]) -> str:
    error = step.error
    result = f"error {error.type}: {error.message}" if error else _compact(step.output)
    retries = "".join(
        f"\n        attempt {a.attempt} failed at {_short(a.at)}: {a.error.type}: {a.error.message}"
        for a in attempts if step.error is None or a.attempt != step.attempts
    )
    return (
        f"  {step.position:>4}  {step.kind.value:<13} {step.name:<20} "
        f"x{step.attempts}  {_short(step.started_at)} -> {_short(step.finished_at)}  {result}"
        f"{retries}"
    )


def _waiting(run: Run) -> str:
    parts = []
    if run.wait_key:
        parts.append(f"event {run.wait_key!r}")
    if run.status.value == "waiting" and run.due_at is not None:
        parts.append(f"until {_short(run.due_at)}")
    return f" ({' or '.join(parts)})" if parts else ""


def _compact(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error(error: ErrorInfo | None) -> dict[str, Any] | None:
    return None if error is None else error.to_json()


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _short(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
