"""A run's timeline, read from its journal: what happened, how long it took, what it cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_runtime.agent import Agent, AgentInput
from agent_runtime.approvals import Approval
from agent_runtime.budget import Budget, Consumption, budget_left
from agent_runtime.budget_control import model_call_of
from agent_runtime.records import AttemptRecord, Run, StepKind, StepRecord
from agent_runtime.step_names import MODEL, TOOL, tool_of


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One line of the timeline."""

    position: int
    kind: str
    name: str
    started_at: str
    duration_ms: float
    attempts: int
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "position": self.position,
            "kind": self.kind,
            "name": self.name,
            "started_at": self.started_at,
            "duration_ms": self.duration_ms,
            "attempts": self.attempts,
            **self.detail,
        }


def timeline(
    run: Run,
    journal: list[StepRecord],
    attempts: list[AttemptRecord],
    approvals: list[Approval],
    agent: Agent | None,
) -> list[Entry]:
    """Return the run's timeline; for agent runs with tokens, cost and budget left."""
    used = Consumption()
    budget = _budget(run, agent)
    decided: dict[str, Approval] = {a.id: a for a in approvals}
    failures: dict[int, list[str]] = {}
    for attempt in attempts:
        failures.setdefault(attempt.position, []).append(
            f"attempt {attempt.attempt}: {attempt.error.type}: {attempt.error.message}"
        )
    return [
        _entry(step, used, budget, agent, decided, failures.get(step.position, []))
        for step in journal
    ]


def _entry(
    step: StepRecord,
    used: Consumption,
    budget: Budget | None,
    agent: Agent | None,
    approvals: dict[str, Approval],
    failures: list[str],
) -> Entry:
    detail: dict[str, Any] = {}
    if step.kind == StepKind.STEP and step.name == MODEL and step.error is None:
        detail |= _model_detail(step, used, budget, agent)
    if step.kind == StepKind.STEP and tool_of(TOOL, step.name) is not None and step.error is None:
        used.tool_calls += 1
    started = step.name.startswith("tool.started:") and isinstance(step.output, dict)
    if started and step.output.get("refused"):
        detail["refused"] = step.output["refused"]
    if step.kind == StepKind.WAIT and isinstance(step.output, dict):
        data = step.output.get("data")
        approval = approvals.get(data.get("approval_id", "")) if isinstance(data, dict) else None
        if approval is not None:
            detail["approval"] = _approval_detail(approval)
    if step.error is not None:
        detail["error"] = f"{step.error.type}: {step.error.message}"
    if failures:
        detail["retries"] = failures
    duration = (step.finished_at - step.started_at).total_seconds() * 1000
    return Entry(
        position=step.position,
        kind=step.kind.value,
        name=step.name,
        started_at=step.started_at.isoformat(),
        duration_ms=round(duration, 3),
        attempts=step.attempts,
        detail=detail,
    )


def _model_detail(
    step: StepRecord, used: Consumption, budget: Budget | None, agent: Agent | None
) -> dict[str, Any]:
    usage, model = model_call_of(step)
    price = None if agent is None else agent.prices.get(model or agent.llm.name)
    before = used.cost_usd
    used.add_model_call(usage, price)
    detail: dict[str, Any] = {
        "model": model,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": round(used.cost_usd - before, 6),
    }
    if budget is not None:
        detail["budget_left"] = budget_left(budget, used)
    return detail


def _approval_detail(approval: Approval) -> dict[str, Any]:
    return {
        "id": approval.id,
        "tool": approval.tool,
        "decision": approval.status.value,
        "by": None if approval.decided_by is None else approval.decided_by.label,
        "at": None if approval.decided_at is None else approval.decided_at.isoformat(),
        "args_hash": approval.decided_args_hash or approval.args_hash,
        "reason": approval.reason,
    } | ({} if approval.preview_digest is None else {"preview_digest": approval.preview_digest})


def _budget(run: Run, agent: Agent | None) -> Budget | None:
    if agent is None:
        return None
    data = AgentInput.of(run.input)
    return data.budget if data is not None and data.budget is not None else agent.budget
