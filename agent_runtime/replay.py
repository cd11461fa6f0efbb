"""Re-running an agent's loop over a recorded journal, acting on nothing.

The loop is rebuilt from the journal exactly as a worker rebuilds it on resume, but the
context answers only from the journal: where the journal ends, the replay stops before the
next call instead of making it. No model is called, no tool runs, nothing is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NoReturn, TypeVar, cast

from agent_runtime.agent import Agent, AgentInput
from agent_runtime.agent_loop import AgentLoop, TurnLimitReached
from agent_runtime.approval_service import Approvals
from agent_runtime.clock import SystemClock
from agent_runtime.context import Abandon, RunContext
from agent_runtime.exceptions import StepFailed
from agent_runtime.models.base import Message
from agent_runtime.records import Lease, Run, StepRecord
from agent_runtime.retry import RetryPolicy
from agent_runtime.store import Store

T = TypeVar("T")


class JournalEnd(BaseException):
    """The replay reached the end of its journal; ``name`` and ``args`` are the next step's.

    ``name`` is None when the next call is not a step (a wait, a clock read).
    """

    def __init__(self, position: int, name: str | None = None, args: tuple[Any, ...] = ()):
        super().__init__(position, name)
        self.position = position
        self.name = name
        self.args = args


class _Sealed:
    """The store of a replay: any use of it is a bug, so it fails loudly."""

    def __getattr__(self, name: str) -> NoReturn:
        raise RuntimeError(f"a replay must not touch the store (it called {name})")


class ReplayContext(RunContext):
    """A context that answers from ``journal`` and raises ``JournalEnd`` where it ends."""

    def __init__(self, run: Run, journal: Sequence[StepRecord]) -> None:
        stopped = threading.Event()
        stopped.set()  # past the journal, non-step calls raise Abandon instead of acting
        super().__init__(
            run=run,
            lease=Lease(run.id, "replay", run.fence),
            journal=journal,
            store=cast(Store, _Sealed()),
            clock=SystemClock(),
            stopping=stopped,
        )

    def step(
        self,
        fn: Callable[..., T],
        *args: Any,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
    ) -> T:
        """Answer from the journal; at its end, raise ``JournalEnd`` with this step's input."""
        if not self.replaying:
            raise JournalEnd(self.position, name, args)
        return super().step(fn, *args, name=name, retry=retry, timeout=timeout)

    def step_hashed(
        self,
        fn: Callable[[Any], T],
        make_input: Callable[[], Any],
        digest: str,
        *,
        name: str,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
    ) -> T:
        """Answer from the journal; at its end, raise ``JournalEnd`` with this step's input."""
        if not self.replaying:
            raise JournalEnd(self.position, name, (make_input(),))
        return super().step_hashed(fn, make_input, digest, name=name, retry=retry, timeout=timeout)


@dataclass(frozen=True, slots=True)
class Replayed:
    """Where a replay got to: the loop's state, its result if the run ended in the journal."""

    loop: AgentLoop
    result: dict[str, Any] | None
    end: JournalEnd | None

    @property
    def messages(self) -> list[Message]:
        """The conversation as the loop holds it."""
        return self.loop.messages


def replay_agent(
    agent: Agent, approvals: Approvals, run: Run, journal: Sequence[StepRecord]
) -> Replayed:
    """Replay ``run``'s agent loop over ``journal``; ``NonDeterminismError`` if it differs."""
    loop = AgentLoop(agent, approvals, ReplayContext(run, journal), AgentInput.from_json(run.input))
    try:
        return Replayed(loop, loop.run(), None)
    except JournalEnd as end:
        return Replayed(loop, None, end)
    except Abandon:
        return Replayed(loop, None, JournalEnd(loop.ctx.position - 1))
    except (StepFailed, TurnLimitReached):  # the run failed here: its journal ends with it
        return Replayed(loop, None, JournalEnd(loop.ctx.position))
