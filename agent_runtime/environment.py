"""A test environment for one agent: script its model, run it, decide its approvals.

Everything is in process memory, under a frozen clock that moves only when a run waits
for a timer::

    env = AgentEnvironment(refund_agent, script=[tool_reply(...), text_reply("done")])
    run_id = env.start("refund order 1042")
    env.run_until_waiting(run_id)
    (approval,) = env.pending(run_id)
    env.approve(approval, as_user="U_DANA")
    env.run_until_waiting(run_id)
    assert env.answer(run_id) == "done"
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agent_runtime.agent import Agent, AgentInput
from agent_runtime.agent_loop import ModelResolver
from agent_runtime.approval_service import DecisionResult
from agent_runtime.approvals import Actor, Approval, ApprovalStatus, Decision
from agent_runtime.budget import Budget
from agent_runtime.clock import FrozenClock
from agent_runtime.deployment import Deployment
from agent_runtime.exceptions import SignoffError
from agent_runtime.ids import RunId
from agent_runtime.memory_approvals import InMemoryApprovalStore
from agent_runtime.memory_store import InMemoryStore
from agent_runtime.models.base import ModelResponse
from agent_runtime.models.scripted import Responder, ScriptedModel
from agent_runtime.records import Run, RunStatus, StepRecord
from agent_runtime.rules import Rules
from agent_runtime.tools import Tool, Tools
from agent_runtime.worker import WorkerOptions

REQUESTER = Actor(user_id="U_REQUESTER", name="requester")
"""Who starts runs unless a test names someone else."""

MAX_EXECUTIONS = 1000
"""How many executions ``run_until_waiting`` allows one run before it gives up."""


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One execution of a tool: the arguments it got, and its result or error."""

    tool: str
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None


class AgentEnvironment:
    """One agent over in-memory stores, a frozen clock and (optionally) a scripted model."""

    def __init__(
        self,
        agent: Agent,
        script: Sequence[ModelResponse] | Responder | None = None,
        *,
        models: ModelResolver | None = None,
        clock: FrozenClock | None = None,
        rules: Rules | None = None,
    ) -> None:
        """With ``script`` the agent's model is replaced by a ``ScriptedModel`` of it; with
        ``rules`` its approvals are first put to those approval rules."""
        self.clock = clock or FrozenClock()
        self.model = None if script is None else ScriptedModel(script, name=agent.llm.name)
        self.tool_calls: list[ToolCallRecord] = []
        """Every tool execution, in order (a journaled result replayed is not one)."""
        self.agent = dataclasses.replace(
            agent,
            model=self.model or agent.model,
            tools=Tools(*(self._recorded(t) for t in agent.tools)),
        )
        self.store = InMemoryStore()
        self.approval_store = InMemoryApprovalStore(self.store)
        self.deployment = Deployment(
            self.store,
            self.approval_store,
            [self.agent],
            clock=self.clock,
            models=models,
            rules=rules,
        )
        self.runtime = self.deployment.runtime
        self.approvals = self.deployment.approvals

    def start(
        self,
        task: str,
        *,
        requester: Actor = REQUESTER,
        budget: Budget | None = None,
        context: dict[str, Any] | None = None,
    ) -> RunId:
        """Start a run of the agent with ``task``; nothing executes until it is run."""
        data = AgentInput(task=task, requester=requester, budget=budget, context=context or {})
        return self.runtime.start(self.agent.workflow, data.to_json()).id

    def run_until_waiting(self, run_id: RunId) -> Run:
        """Execute the run until it ends or waits for a person or an event.

        Timers (a retry's back-off, a durable sleep) are skipped by moving the clock.
        """
        worker = self.runtime.worker(
            WorkerOptions(owner="test-worker", lease_ttl=timedelta(minutes=5))
        )
        for _ in range(MAX_EXECUTIONS):
            run = self.runtime.get(run_id)
            if run.status.finished or (run.status == RunStatus.WAITING and run.wait_key):
                return run
            if run.due_at is not None and run.due_at > self.clock.now():
                self.clock.advance(run.due_at - self.clock.now())
            worker.run_once()
        raise SignoffError(f"run {run_id} was still executing after {MAX_EXECUTIONS} rounds")

    def pending(self, run_id: RunId) -> list[Approval]:
        """Return the run's pending approvals, oldest first."""
        found = self.approval_store.list_approvals(run_id=run_id, status=ApprovalStatus.PENDING)
        return list(reversed(found))

    def approve(
        self, approval: Approval | str, *, as_user: Actor | str, reason: str | None = None
    ) -> DecisionResult:
        """Approve as ``as_user`` (a user id or an ``Actor``)."""
        return self.decide(approval, Decision.APPROVE, as_user=as_user, reason=reason)

    def reject(
        self, approval: Approval | str, *, as_user: Actor | str, reason: str | None = None
    ) -> DecisionResult:
        """Reject as ``as_user``."""
        return self.decide(approval, Decision.REJECT, as_user=as_user, reason=reason)

    def edit(
        self,
        approval: Approval | str,
        arguments: dict[str, Any],
        *,
        as_user: Actor | str,
        reason: str | None = None,
    ) -> DecisionResult:
        """Approve with changed ``arguments`` as ``as_user``."""
        return self.decide(
            approval, Decision.EDIT, as_user=as_user, reason=reason, edited_args=arguments
        )

    def decide(
        self,
        approval: Approval | str,
        decision: Decision,
        *,
        as_user: Actor | str,
        reason: str | None = None,
        edited_args: dict[str, Any] | None = None,
    ) -> DecisionResult:
        """Decide as a person in Slack would; the result says whether it counted."""
        actor = as_user if isinstance(as_user, Actor) else Actor(user_id=as_user)
        found = approval if isinstance(approval, str) else approval.id
        return self.approvals.decide(found, actor, decision, reason=reason, edited_args=edited_args)

    def journal(self, run_id: RunId) -> list[StepRecord]:
        """Return the run's journal."""
        return self.runtime.journal(run_id)

    def answer(self, run_id: RunId) -> str | None:
        """Return the final answer of a completed run (None while it has none)."""
        run = self.runtime.get(run_id)
        if run.status != RunStatus.COMPLETED or not isinstance(run.output, dict):
            return None
        answer = run.output.get("answer")
        return answer if isinstance(answer, str) else None

    def _recorded(self, item: Tool) -> Tool:
        calls = self.tool_calls

        def call(**arguments: Any) -> Any:
            shown = {k: v for k, v in arguments.items() if k != "idempotency_key"}
            try:
                result = item.fn(**arguments)
            except Exception as exc:
                calls.append(ToolCallRecord(item.name, shown, error=f"{type(exc).__name__}: {exc}"))
                raise
            calls.append(ToolCallRecord(item.name, shown, result))
            return result

        return dataclasses.replace(item, fn=call)


__all__ = ["REQUESTER", "AgentEnvironment", "ToolCallRecord"]
