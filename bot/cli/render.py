"""How runs and journals look on the command line: a stable JSON form and a human form."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agent_runtime.previews import stored, stored_error
from bot.slack.text import visible

if TYPE_CHECKING:
    from agent_runtime import Approval, AttemptRecord, ErrorInfo, Run, StepRecord
    from agent_runtime.history import Entry


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
        "forked_from": run.forked_from,
        "fork_at": run.fork_at,
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


def approval_json(approval: Approval) -> dict[str, Any]:
    """Return the stable JSON form of an approval."""
    return {
        "id": approval.id,
        "run_id": approval.run_id,
        "kind": approval.kind.value,
        "tool": approval.tool,
        "args": approval.args,
        "args_hash": approval.args_hash,
        "status": approval.status.value,
        "requester": approval.requester.to_json(),
        "requested_at": _time(approval.requested_at),
        "deadline": _time(approval.deadline),
        "approvers": list(approval.eligible),
        "approvals": list(approval.approvals),
        "decided_by": None if approval.decided_by is None else approval.decided_by.to_json(),
        "decided_at": _time(approval.decided_at),
        "decided_args": approval.decided_args,
        "decided_args_hash": approval.decided_args_hash,
        "proposed_args_hash": approval.proposed_hash,
        "reason": approval.reason,
        "diff": approval.diff,
        "question": approval.reason_asked or None,
        "preview": approval.preview,
        "preview_digest": approval.preview_digest,
    }


def approval_line(approval: Approval) -> str:
    """Return one line describing an approval, for listings (with what it asks below, when
    it is not whether a tool may run)."""
    who = _decided_by(approval)
    return (
        (
            f"{approval.id}  {approval.status.value:<8}{who:<14}  {_asked(approval):<14} "
            f"{_compact(approval.decided_args or approval.args, 60)}  run {approval.run_id}"
        )
        + _question_lines(approval)
        + _preview_lines(approval)
    )


def _decided_by(approval: Approval) -> str:
    """Who decided it: of a superseded approval, who had approved what the call would have
    done before it changed (they did not supersede it)."""
    if approval.decided_by is None:
        return ""
    if approval.status.value == "superseded":
        return f" (approved by {approval.decided_by.label})"
    return f" by {approval.decided_by.label}"


OUTCOME_MEANING = "approve = it happened (it is not run again); reject = it did not (it runs again)"
"""What deciding a question about a call a crash cut off does (``ApprovalKind.OUTCOME``)."""


def _asked(approval: Approval) -> str:
    """The tool, tagged with what is asked about it when that is not whether it may run."""
    tag = {"outcome": " [did it happen?]", "budget": " [budget]"}.get(approval.kind.value, "")
    return approval.tool + tag  # by value: the CLI that lists runs loads no approvals


def _question_lines(approval: Approval, indent: str = "    ") -> str:
    """The question asked, on the lines below ('' for a tool call's approval, whose
    question is its name); what each answer does, if the question does not say."""
    lines = [visible(line) for line in approval.reason_asked.splitlines() if line.strip()]
    if approval.kind.value == "outcome" and not lines:  # its question says it otherwise
        lines.append(OUTCOME_MEANING)
    return "".join(f"\n{indent}{line}" for line in lines)


def _preview_lines(approval: Approval, indent: str = "    ") -> str:
    """What the call would do, as its preview said, on the lines below ('' without one).

    The preview comes from live data: invisible and direction-changing characters are shown
    as escapes, so it reads on a terminal as it is.
    """
    error = stored_error(approval.preview)
    if error is not None:
        return f"\n{indent}preview failed: {visible(error)}"
    preview = stored(approval.preview)
    if preview is None:
        return ""
    lines = [visible(line) for line in preview.text.splitlines()]
    for label, value in preview.table:  # a value's further lines under its first
        first, *more = visible(value).splitlines() or [""]
        name = " ".join(visible(label).splitlines())
        lines += [f"{name}: {first}", *(f"  {line}" if line else "" for line in more)]
    digest = f" (preview sha256 {approval.preview_digest[:12]}…)" if approval.preview_digest else ""
    return "".join(f"\n{indent}{line}" if line else "\n" for line in lines) + digest


def history_line(entry: Entry) -> str:
    """One timeline entry as text."""
    data = entry.to_json()
    extras = []
    if "input_tokens" in data:
        extras.append(
            f"{data['input_tokens']}+{data['output_tokens']} tokens ${data['cost_usd']:.4f}"
        )
    if data.get("budget_left"):  # {} for a run without limits: nothing is left to say
        extras.append("left " + ", ".join(f"{k} {v}" for k, v in data["budget_left"].items()))
    if "approval" in data:
        a = data["approval"]
        extras.append(
            f"{a['tool']} {a['decision']} by {a['by']} (sha256 {a['args_hash'][:8]}…)"
            + (f": {a['reason']}" if a["reason"] else "")
        )
    extras += [f"error {data['error']}"] if "error" in data else []
    extras += [f"not run: {data['refused']}"] if "refused" in data else []
    extras += data.get("retries", [])
    return (
        f"  {entry.position:>4}  {entry.kind:<13} {entry.name:<28} {entry.duration_ms:>9.1f} ms"
        f"  x{entry.attempts}" + ("  " + " · ".join(extras) if extras else "")
    )


def run_line(run: Run) -> str:
    """Return one line describing a run, for listings."""
    return f"{run.id}  {run.status.value:<9}  {run.workflow:<24}  {_short(run.created_at)}"


def forks_json(forks: list[Run]) -> list[dict[str, Any]]:
    """Return the stable JSON form of a run's forks."""
    return [{"id": f.id, "at": f.fork_at} for f in forks]


def fork_origin(run: Run) -> str:
    """Where a fork comes from, as text."""
    return f"from {run.forked_from} at step {run.fork_at}"


def fork_line(fork: Run) -> str:
    """One fork of a run, as text."""
    return f"{fork.id} at step {fork.fork_at} ({fork.status.value})"


def run_detail(
    run: Run,
    steps: list[StepRecord],
    attempts: list[AttemptRecord],
    approvals: list[Approval] | None = None,
    usage: dict[str, Any] | None = None,
    forks: list[Run] | None = None,
) -> str:
    """Return a run, its journal, approvals, usage and forks as readable text."""
    lines = [
        f"run       {run.id}",
        f"workflow  {run.workflow}",
        f"status    {run.status.value}{_waiting(run)}",
        f"input     {_compact(run.input)}",
    ]
    if run.forked_from is not None:
        lines.append(f"forked    {fork_origin(run)}")
    if run.output is not None:
        lines.append(f"output    {_compact(run.output)}")
    if run.error is not None:
        lines.append(f"error     {run.error.type}: {run.error.message}")
    lines.append(f"steps     {len(steps)}")
    by_position: dict[int, list[AttemptRecord]] = {}
    for attempt in attempts:
        by_position.setdefault(attempt.position, []).append(attempt)
    lines += [_step_line(s, by_position.get(s.position, [])) for s in steps]
    if approvals:
        lines.append(f"approvals {len(approvals)}")
        lines += [f"  {_approval_detail(a)}" for a in approvals]
    if usage is not None:
        lines.append(
            f"usage     {usage['tokens']} tokens, ${usage['cost_usd']:.4f}, "
            f"{usage['model_calls']} model calls, {usage['tool_calls']} tool calls"
        )
    lines += [f"fork      {fork_line(f)}" for f in forks or ()]
    return "\n".join(lines)


def _approval_detail(approval: Approval) -> str:
    text = f"{approval.id} {_asked(approval)} {approval.status.value}"
    if approval.decided_at is not None:
        text += f"{_decided_by(approval)} at {_short(approval.decided_at)}"
    digest = approval.decided_args_hash or approval.args_hash
    text += f" (args sha256 {digest[:12]}…)"
    text += f": {approval.reason}" if approval.reason else ""
    return text + _question_lines(approval, "      ") + _preview_lines(approval, "      ")


def _step_line(step: StepRecord, attempts: list[AttemptRecord]) -> str:
    error = step.error
    result = f"error {error.type}: {error.message}" if error else _compact(step.output)
    retries = "".join(
        f"\n        attempt {a.attempt} failed at {_short(a.at)}: {a.error.type}: {a.error.message}"
        for a in attempts
        if step.error is None or a.attempt != step.attempts
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
