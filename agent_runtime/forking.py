"""Forks: a new run that starts from another run's journal, at a step of the user's choosing.

The fork inherits the entries before step K as they were recorded: replaying them pays no
model call and repeats no side effect. Step K is then taken live, or answered from a
replacement result the user gives. Agent runs fork at a model call, the one point where
no approval or side effect is half done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from agent_runtime.agent import Agent
from agent_runtime.approval_service import Approvals
from agent_runtime.exceptions import InvalidInput, NonDeterminismError
from agent_runtime.ids import RunId
from agent_runtime.model_input import is_model_step, model_positions
from agent_runtime.models.base import ModelResponse
from agent_runtime.records import Fork, Run, StepKind, StepRecord
from agent_runtime.replay import replay_agent
from agent_runtime.runtime import Runtime
from agent_runtime.serialization import round_trip


def fork_points(journal: Sequence[StepRecord], *, agent_run: bool) -> list[int]:
    """Return the positions a run may be forked at: model calls for an agent run, else steps."""
    if agent_run:
        return model_positions(journal)
    return [s.position for s in journal if s.kind == StepKind.STEP]


def plan_fork(
    run: Run,
    journal: Sequence[StepRecord],
    at: int,
    *,
    agent_run: bool,
    output: Any = None,
    replace_output: bool = False,
    now: datetime,
) -> Fork:
    """Return the fork of ``run`` at step ``at``; ``InvalidInput`` names the valid points.

    With ``replace_output`` the fork inherits step ``at`` too, with ``output`` as its result
    (for an agent run, a model response in its JSON form).
    """
    points = fork_points(journal, agent_run=agent_run)
    if at not in points:
        what = "model calls" if agent_run else "steps"
        listed = ", ".join(map(str, points)) or "none"
        raise InvalidInput("fork", f"run {run.id} can be forked at its {what}: {listed} (not {at})")
    steps = tuple(journal[:at])
    if replace_output:
        value = round_trip(output, what="the replacement output")
        if is_model_step(journal[at]):
            _check_model_response(value)
        steps += (
            replace(
                journal[at], output=value, error=None, attempts=1, started_at=now, finished_at=now
            ),
        )
    return Fork(source=run.id, at=at, steps=steps)


def _check_model_response(value: Any) -> None:
    try:
        if ModelResponse.from_json(value).message.role != "assistant":
            raise ValueError("the message's role must be assistant")
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise InvalidInput(
            "fork",
            'a model step\'s output is a model response like {"message":'
            ' {"role": "assistant", "content": "..."}, "usage": {...}}'
            f" ({type(exc).__name__}: {exc})",
        ) from None


def fork_run(
    runtime: Runtime,
    source: RunId,
    at: int,
    *,
    agent_run: bool,
    output: Any = None,
    replace_output: bool = False,
    workflow: str | None = None,
    input: Any = None,
    check: ForkCheck | None = None,
) -> Run:
    """Fork ``source`` at step ``at`` and return the new pending run (see ``plan_fork``).

    The fork runs ``workflow`` with ``input`` when given, else the source's; ``check`` may
    refuse the fork (raising) before anything is written.
    """
    run = runtime.get(source)
    fork = plan_fork(
        run,
        runtime.journal(source),
        at,
        agent_run=agent_run,
        output=output,
        replace_output=replace_output,
        now=runtime.clock.now(),
    )
    data = run.input if input is None else input
    if check is not None:
        check(replace(run, input=data, forked_from=run.id, fork_at=at), fork)
    return runtime.start(workflow or run.workflow, data, fork=fork)


ForkCheck = Callable[[Run, Fork], None]
"""Given the fork as a draft run and what it inherits, raise to refuse it."""


def agent_can_continue(agent: Agent, approvals: Approvals) -> ForkCheck:
    """A check that ``agent`` replays the inherited entries (same tools, same kind of steps)."""

    def check(draft: Run, fork: Fork) -> None:
        try:
            replay_agent(agent, approvals, draft, fork.steps)
        except (NonDeterminismError, ValueError) as exc:
            raise InvalidInput(
                "fork",
                f"agent {agent.name} cannot continue run {fork.source} from step {fork.at}: {exc}",
            ) from None

    return check
