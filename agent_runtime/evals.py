"""Evals: re-run recorded trajectories against another model or agent, executing no tool.

The recorded run is replayed (no call made) to recover its conversation. A candidate agent
then runs the same task live, but its tools are answered from that recording: a call whose
tool and canonical arguments were recorded gets the recorded result, including approvals
that were refused; any other call is a divergence, answered with a "not replayed" error or,
on request, ending the trajectory there. The real tools are never called.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_runtime.agent import Agent, AgentInput
from agent_runtime.agent_loop import AgentLoop, ToolPlan
from agent_runtime.approval_service import Approvals
from agent_runtime.approvals import Approval, ApprovalStatus, args_hash
from agent_runtime.budget import Consumption
from agent_runtime.clock import SystemClock
from agent_runtime.context import RunContext, Suspend
from agent_runtime.eval_approvals import ApprovalCounts, approval_counts
from agent_runtime.exceptions import SignoffError
from agent_runtime.ids import new_run_id
from agent_runtime.memory_store import InMemoryStore
from agent_runtime.models.base import Message, ToolCall
from agent_runtime.records import Run, StepRecord
from agent_runtime.replay import replay_agent
from agent_runtime.rule_decisions import AUTOMATIC_ACTOR_PREFIXES
from agent_runtime.serialization import canonical_json
from agent_runtime.side_effects import ToolResult

NOT_REPLAYED = "not replayed: {tool} was not called with these arguments in the recorded run"


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of a trajectory and the result the model got for it."""

    tool: str
    arguments: dict[str, Any]
    result: str
    is_error: bool
    replayed: bool = True
    decision: dict[str, Any] | None = None
    """For a call that needed approval: the decision taken (status, by whom, why)."""

    @property
    def signature(self) -> tuple[str, str]:
        """Tool name and canonical arguments: what makes two calls the same call."""
        return self.tool, canonical_json(self.arguments)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "tool": self.tool,
            "arguments": self.arguments,
            "result": self.result,
            "is_error": self.is_error,
            "replayed": self.replayed,
            "decision": self.decision,
        }


@dataclass(frozen=True, slots=True)
class Trajectory:
    """What one run did: its tool calls in order, its answer and what it used."""

    calls: list[Call]
    answer: str | None
    ended: str
    used: Consumption

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "calls": [c.to_json() for c in self.calls],
            "answer": self.answer,
            "ended": self.ended,
            "tokens": self.used.tokens,
            "cost_usd": round(self.used.cost_usd, 6),
            "model_calls": self.used.model_calls,
        }


@dataclass(frozen=True, slots=True)
class Divergence:
    """The candidate's call at ``index`` was not in the recording."""

    index: int
    call: Call
    recorded: Call | None

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "index": self.index,
            "tool": self.call.tool,
            "arguments": self.call.arguments,
            "recorded": None
            if self.recorded is None
            else {"tool": self.recorded.tool, "arguments": self.recorded.arguments},
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """A recorded run beside its re-run."""

    run_id: str
    task: str
    recorded: Trajectory
    candidate: Trajectory
    divergences: list[Divergence]
    approvals: ApprovalCounts = field(default_factory=ApprovalCounts)

    @property
    def same_calls(self) -> bool:
        """Tell whether both made the same tool calls in the same order."""
        return [c.signature for c in self.recorded.calls] == [
            c.signature for c in self.candidate.calls
        ]

    @property
    def same_answer(self) -> bool:
        """Tell whether both gave the same final answer."""
        return self.recorded.answer == self.candidate.answer

    @property
    def agrees(self) -> bool:
        """Same calls, same answer, nothing diverged."""
        return self.same_calls and self.same_answer and not self.divergences

    @property
    def token_delta(self) -> int:
        """The re-run's tokens minus the recorded run's."""
        return self.candidate.used.tokens - self.recorded.used.tokens

    @property
    def cost_delta_usd(self) -> float:
        """The re-run's cost minus the recorded run's."""
        return round(self.candidate.used.cost_usd - self.recorded.used.cost_usd, 6)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "run_id": self.run_id,
            "task": self.task,
            "agrees": self.agrees,
            "same_calls": self.same_calls,
            "same_answer": self.same_answer,
            "divergences": [d.to_json() for d in self.divergences],
            "recorded": self.recorded.to_json(),
            "candidate": self.candidate.to_json(),
            "token_delta": self.token_delta,
            "cost_delta_usd": self.cost_delta_usd,
            "approvals": self.approvals.to_json(),
        }


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Every comparison of an eval and what they add up to."""

    candidate: str
    comparisons: list[Comparison]

    def summary(self) -> dict[str, Any]:
        """Agreement rate, divergence points, and token and cost deltas across the runs."""
        count = len(self.comparisons)
        agreeing = sum(c.agrees for c in self.comparisons)
        points: dict[str, int] = {}
        for comparison in self.comparisons:
            for divergence in comparison.divergences[:1]:
                key = f"call {divergence.index + 1}: {divergence.call.tool}"
                points[key] = points.get(key, 0) + 1
        return {
            "candidate": self.candidate,
            "runs": count,
            "agreeing": agreeing,
            "agreement_rate": 1.0 if count == 0 else round(agreeing / count, 4),
            "same_calls": sum(c.same_calls for c in self.comparisons),
            "same_answer": sum(c.same_answer for c in self.comparisons),
            "divergence_points": dict(sorted(points.items())),
            "token_delta": sum(c.token_delta for c in self.comparisons),
            "cost_delta_usd": round(sum(c.cost_delta_usd for c in self.comparisons), 6),
            "approvals": sum((c.approvals for c in self.comparisons), ApprovalCounts()).to_json(),
        }

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"summary": self.summary(), "runs": [c.to_json() for c in self.comparisons]}


class StopTrajectory(BaseException):
    """Ends a candidate's trajectory at its first divergence (a BaseException: nothing in
    the loop may turn it into a tool error)."""


@dataclass
class Recording:
    """The recorded results, by call signature, handed out in the order they were made.

    One re-run uses it, from the thread that runs the loop.
    """

    answers: dict[tuple[str, str], deque[Call]]
    stop_at_divergence: bool = False
    made: list[Call] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    recorded: list[Call] = field(default_factory=list)

    @classmethod
    def of(cls, calls: Sequence[Call], *, stop_at_divergence: bool = False) -> Recording:
        """Index a recorded trajectory's calls."""
        answers: dict[tuple[str, str], deque[Call]] = {}
        for call in calls:
            answers.setdefault(call.signature, deque()).append(call)
        return cls(answers, stop_at_divergence, recorded=list(calls))

    def answer(self, tool: str, arguments: dict[str, Any]) -> Call:
        """Return the recorded result of this call, or record a divergence."""
        asked = Call(tool, arguments, "", False)
        queue = self.answers.get(asked.signature)
        index = len(self.made)
        if queue:
            found = queue.popleft()
            self.made.append(found)
            return found
        missed = Call(tool, arguments, NOT_REPLAYED.format(tool=tool), True, replayed=False)
        self.made.append(missed)
        expected = self.recorded[index] if index < len(self.recorded) else None
        self.divergences.append(Divergence(index, missed, expected))
        if self.stop_at_divergence:
            raise StopTrajectory()
        return missed


def recorded_trajectory(
    agent: Agent,
    approvals: Approvals,
    run: Run,
    journal: Sequence[StepRecord],
    decided: Sequence[Approval] = (),
) -> Trajectory:
    """Recover what ``run`` did by replaying its journal: calls nothing.

    ``decided`` are the run's approvals, to show each call's decision.
    """
    replayed = replay_agent(agent, approvals, run, journal)
    result = replayed.result or {}
    ended = str(result.get("ended") or "answered") if replayed.result else run.status.value
    return Trajectory(
        calls=calls_of(replayed.messages, decided),
        answer=result.get("answer"),
        ended=ended,
        used=replayed.loop.used,
    )


def calls_of(messages: Sequence[Message], decided: Sequence[Approval] = ()) -> list[Call]:
    """Return the tool calls of a conversation with the results the model got."""
    proposed = {c.id: c for m in messages for c in m.tool_calls}
    pending = list(reversed(decided))  # oldest first, each approval used once
    calls = []
    for message in messages:
        call = proposed.get(message.tool_call_id or "") if message.role == "tool" else None
        if call is not None:
            calls.append(
                Call(
                    call.name,
                    call.arguments,
                    message.content,
                    message.is_error,
                    decision=_decision(call.name, call.arguments, pending),
                )
            )
    return calls


def _decision(
    tool: str, arguments: dict[str, Any], pending: list[Approval]
) -> dict[str, Any] | None:
    digest = args_hash(arguments)
    for approval in pending:
        if approval.tool == tool and approval.args_hash == digest:
            pending.remove(approval)
            by = approval.decided_by
            return {
                "status": approval.status.value,
                "reason": approval.reason,
                "by": None if by is None else by.label,
                "automatic": by is not None and by.user_id.startswith(AUTOMATIC_ACTOR_PREFIXES),
                "args_hash": approval.decided_args_hash or approval.args_hash,
                "args": approval.decided_args
                if approval.status == ApprovalStatus.APPROVED
                else None,
            }
    return None


def rerun(candidate: Agent, approvals: Approvals, run: Run, recording: Recording) -> Trajectory:
    """Run ``run``'s task with ``candidate``, its tools answered from ``recording``."""
    store = InMemoryStore()
    clock = SystemClock()
    now = clock.now()
    draft = store.create_run(new_run_id(), candidate.workflow, run.input, now)
    ((claimed, lease),) = store.claim_runs("eval", limit=1, now=now, expires_at=now)
    context = RunContext(
        run=claimed, lease=lease, journal=[], store=store, clock=clock, stopping=threading.Event()
    )
    loop = ReplayingLoop(
        candidate, approvals, context, AgentInput.from_json(draft.input), recording
    )
    answer, ended = None, "answered"
    try:
        result = loop.run()
        answer, ended = result["answer"], str(result["ended"] or "answered")
    except StopTrajectory:
        ended = "diverged"
    except Suspend:
        ended = "waiting"
    except SignoffError as exc:
        ended = f"failed: {type(exc).__name__}: {exc}"
    return Trajectory(calls=list(recording.made), answer=answer, ended=ended, used=loop.used)


def compare(
    agent: Agent,
    candidate: Agent,
    approvals: Approvals,
    run: Run,
    journal: Sequence[StepRecord],
    *,
    decided: Sequence[Approval] = (),
    stop_at_divergence: bool = False,
) -> Comparison:
    """Re-run one recorded run with ``candidate`` and set the two side by side."""
    recorded = recorded_trajectory(agent, approvals, run, journal, decided)
    recording = Recording.of(recorded.calls, stop_at_divergence=stop_at_divergence)
    rerun_trajectory = rerun(candidate, approvals, run, recording)
    data = AgentInput.of(run.input)
    task = "" if data is None else data.task
    counts = approval_counts(
        lambda name: _needs_approval(candidate, name), recorded.calls, rerun_trajectory.calls
    )
    return Comparison(run.id, task, recorded, rerun_trajectory, list(recording.divergences), counts)


def _needs_approval(agent: Agent, name: str) -> bool:
    tool = agent.tools.get(name)
    return tool is not None and tool.approval is not None


class ReplayingLoop(AgentLoop):
    """The agent loop with every tool call answered from a recording, never executed."""

    def __init__(
        self,
        agent: Agent,
        approvals: Approvals,
        ctx: RunContext,
        data: AgentInput,
        recording: Recording,
    ) -> None:
        super().__init__(agent, approvals, ctx, data)
        self.recording = recording

    def _plan(self, call: ToolCall) -> ToolPlan:
        found = self.recording.answer(call.name, call.arguments)
        self.used.tool_calls += 1
        return ToolPlan(call, None, ToolResult(found.result, is_error=found.is_error))
