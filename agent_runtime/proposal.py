"""Why a call was proposed: the model step that proposed it, rebuilt from the journal.

What the model read there (the task and every tool result before it) is rebuilt the way
``signoff inspect`` rebuilds it, by replaying the run up to the step; what it answered (its
text and the calls it proposed) is the step's journaled output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_runtime.agent import Agent, AgentInput
from agent_runtime.approval_service import Approvals
from agent_runtime.exceptions import InvalidInput, SignoffError
from agent_runtime.model_input import is_model_step, model_input
from agent_runtime.records import Run, StepRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """The model step that proposed a call: what it read and what it answered."""

    run_id: str
    position: int
    reasoning: str
    """The text the model gave with its calls (empty if it gave none)."""
    calls: list[dict[str, Any]]
    """The tool calls it proposed in that turn: ``name`` and ``arguments``."""
    task: str
    """The task the run was given (a person's words: untrusted)."""
    tool_results: list[dict[str, Any]]
    """Every tool result the model had read by then, oldest first (untrusted)."""
    rebuilt: bool
    """False if the conversation could not be rebuilt (the agent changed since)."""


def proposing_step(journal: Sequence[StepRecord], position: int) -> int:
    """Return the position of the last model call before ``position``."""
    found = [s.position for s in journal[:position] if is_model_step(s)]
    if not found:
        raise InvalidInput("why", f"no model call precedes step {position}")
    return found[-1]


def proposal(
    agent: Agent, approvals: Approvals, run: Run, journal: Sequence[StepRecord], position: int
) -> Proposal:
    """Return the model step that proposed the call asked about at journal ``position``."""
    step = proposing_step(journal, position)
    message = _message(journal[step])
    data = AgentInput.of(run.input)
    task = "" if data is None else data.task
    try:
        seen = model_input(agent, approvals, run, journal, step)
    except SignoffError:
        results: list[dict[str, Any]] | None = None
    else:
        results = seen.tool_results
    return Proposal(
        run_id=run.id,
        position=step,
        reasoning=str(message.get("content") or ""),
        calls=[
            {"name": str(c.get("name", "")), "arguments": c.get("arguments")}
            for c in message.get("tool_calls") or []
            if isinstance(c, dict)
        ],
        task=task,
        tool_results=results or [],
        rebuilt=results is not None,
    )


def _message(step: StepRecord) -> dict[str, Any]:
    output = step.output if isinstance(step.output, dict) else {}
    message = output.get("message")
    return message if isinstance(message, dict) else {}
