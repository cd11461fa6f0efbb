"""What the model saw at a step: the request rebuilt from the journal, checked by its hash.

A model step's journal entry keeps the hash of its input, not the input. Replaying the run
up to the step rebuilds the request the loop sent; that its hash equals the recorded one
proves it is byte-for-byte the request that was sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_runtime.agent import Agent
from agent_runtime.agent_loop import request_json
from agent_runtime.approval_service import Approvals
from agent_runtime.budget import budget_left
from agent_runtime.evals import calls_of
from agent_runtime.exceptions import InvalidInput
from agent_runtime.models.base import Message, ModelRequest, WireModel
from agent_runtime.records import Run, StepKind, StepRecord
from agent_runtime.replay import replay_agent
from agent_runtime.request_digest import request_hash
from agent_runtime.serialization import canonical_json
from agent_runtime.step_names import MODEL


def is_model_step(step: StepRecord) -> bool:
    """Tell whether ``step`` records a model call."""
    return step.kind == StepKind.STEP and step.name == MODEL


def model_positions(journal: Sequence[StepRecord]) -> list[int]:
    """Return the positions of the journal's model calls."""
    return [s.position for s in journal if is_model_step(s)]


@dataclass(frozen=True, slots=True)
class ModelInput:
    """The input of the model call at ``position``, and the run's state just before it."""

    run_id: str
    position: int
    request: dict[str, Any]
    input_hash: str
    recorded_input_hash: str
    used: dict[str, Any]
    budget_left: dict[str, Any]
    tool_results: list[dict[str, Any]]
    wire: dict[str, Any] | None = None
    """For a model sent over HTTP: the JSON body it sends for this request."""

    @property
    def identical(self) -> bool:
        """Tell whether the rebuilt request is the one recorded (same hash)."""
        return self.input_hash == self.recorded_input_hash

    @property
    def request_text(self) -> str:
        """The request as canonical JSON: the exact bytes its journal hash is taken over."""
        return canonical_json(self.request)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "run_id": self.run_id,
            "step": self.position,
            "identical": self.identical,
            "input_hash": self.input_hash,
            "recorded_input_hash": self.recorded_input_hash,
            "request_sha256": _sha256(self.request_text),
            "system_prompt_sha256": _sha256(self.request["system"]),
            "used": self.used,
            "budget_left": self.budget_left,
            "tool_results": self.tool_results,
            "request": self.request,
            "wire": self.wire,
        }


def model_input(
    agent: Agent, approvals: Approvals, run: Run, journal: Sequence[StepRecord], position: int
) -> ModelInput:
    """Rebuild the input of the model call at ``position`` by replaying the run up to it."""
    if not 0 <= position < len(journal) or not is_model_step(journal[position]):
        found = ", ".join(map(str, model_positions(journal))) or "none"
        raise InvalidInput(
            "inspect",
            f"step {position} of run {run.id} is not a model call "
            f"(model calls are at steps: {found})",
        )
    replayed = replay_agent(agent, approvals, run, journal[:position])
    end = replayed.end
    if end is None or end.position != position or end.name != MODEL:
        raise InvalidInput(
            "inspect",
            f"replaying run {run.id} with agent {agent.name} does not "
            f"reach a model call at step {position}",
        )
    sent: ModelRequest = end.args[0]
    request = request_json(sent)
    loop = replayed.loop
    return ModelInput(
        run_id=run.id,
        position=position,
        request=request,
        input_hash=request_hash(request, like=journal[position].input_hash),
        recorded_input_hash=journal[position].input_hash,
        used=loop.used.to_json(),
        budget_left=budget_left(loop.budget, loop.used),
        tool_results=tool_results(request["messages"]),
        wire=agent.llm.wire_body(sent) if isinstance(agent.llm, WireModel) else None,
    )


def tool_results(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return every tool result in ``messages`` (JSON form), with the call it answers."""
    calls = calls_of([Message.from_json(m) for m in messages])
    return [
        {"tool": c.tool, "arguments": c.arguments, "result": c.result, "is_error": c.is_error}
        for c in calls
    ]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
