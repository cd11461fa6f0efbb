"""What a person can do about a run whose budget ran out: raise it, or end the run."""

from __future__ import annotations

from typing import Any

from agent_runtime.agent import Agent, AgentInput
from agent_runtime.approvals import Actor
from agent_runtime.budget import Budget, Consumption
from agent_runtime.exceptions import InvalidRunState, UserError
from agent_runtime.ids import RunId
from agent_runtime.models.base import Usage
from agent_runtime.records import Run, StepKind, StepRecord
from agent_runtime.runtime import Runtime
from agent_runtime.step_names import MODEL, TOOL, is_budget_key, tool_of


class NotAllowed(UserError):
    """The person may not do this."""


def decide_budget(
    runtime: Runtime,
    agent: Agent,
    run_id: RunId,
    actor: Actor,
    *,
    limits: Budget | None = None,
    end: bool = False,
) -> Run:
    """Raise the exhausted budget of a waiting run to ``limits`` (or end the run)."""
    run = runtime.get(run_id)
    if not is_budget_key(run.wait_key):
        raise InvalidRunState(
            run_id, run.status.value + " (its budget is not exhausted)", "raise the budget of"
        )
    started = AgentInput.of(run.input)
    started_by = None if started is None else started.requester
    in_workspace = started_by is None or actor.shares_workspace(started_by)
    if not (in_workspace and agent.may_raise_budget(actor)):
        raise NotAllowed(f"{actor.label} may not change the budget of agent {agent.name!r}")
    data: dict[str, Any] = {"action": "end" if end else "raise", "by": actor.to_json()}
    if limits is not None:
        data["limits"] = {k: v for k, v in limits.to_json().items() if v is not None}
    return runtime.deliver(run_id, run.wait_key or "", data)


def model_call_of(step: StepRecord) -> tuple[Usage, str]:
    """The usage and model name a journaled model step recorded."""
    output = step.output if isinstance(step.output, dict) else {}
    usage = output.get("usage") or {}
    return (
        Usage(
            input_tokens=usage.get("input_tokens", 0), output_tokens=usage.get("output_tokens", 0)
        ),
        output.get("model") or "",
    )


def usage_of(journal: list[StepRecord], agent: Agent) -> Consumption:
    """Rebuild a run's consumption from its journal."""
    used = Consumption()
    for step in journal:
        if step.kind != StepKind.STEP or step.error is not None:
            continue
        if step.name == MODEL:
            usage, model = model_call_of(step)
            used.add_model_call(usage, agent.prices.get(model or agent.llm.name))
        elif tool_of(TOOL, step.name) is not None:
            used.tool_calls += 1
    return used
