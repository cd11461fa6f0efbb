"""An in-memory agent set-up for unit tests: stores, clock, scripted model, counted tools."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from agent_runtime import (
    Actor,
    Agent,
    ApprovalPolicy,
    Budget,
    Decision,
    RetryPolicy,
    Run,
    RunId,
    RunStatus,
    Tools,
    UnknownOutcome,
    WorkerOptions,
    tool,
)
from agent_runtime.agent_loop import ModelResolver
from agent_runtime.models import (
    Model,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    text_reply,
    tool_reply,
)
from agent_runtime.testing import AgentEnvironment

LOOKUP = tool_reply(ToolCall(id="c1", name="lookup_order", arguments={"order_id": "1042"}))
REFUND = tool_reply(
    ToolCall(id="c2", name="issue_refund", arguments={"order_id": "1042", "amount_cents": 4999})
)
BOTH = tool_reply(
    ToolCall(id="c2", name="issue_refund", arguments={"order_id": "1042", "amount_cents": 4999}),
    ToolCall(id="c3", name="send_email", arguments={"to": "d@example.com", "body": "hi"}),
)
DONE = text_reply("done")
"""Scripted answers: look order 1042 up, refund it (and email), then answer."""

LOOKUP_RETRY = RetryPolicy(max_attempts=3, initial_interval=timedelta(minutes=1))
"""lookup_order retries a minute apart: long enough to stop a worker in the pause."""

REQUESTER = Actor(user_id="U_REQ", name="rita")
DANA = Actor(user_id="U_DANA", name="dana")
OMAR = Actor(user_id="U_OMAR", name="omar")
EVE = Actor(user_id="U_EVE", name="eve")


class Crash(BaseException):
    """Stands for the worker process dying; nothing in the engine may catch it."""


class AgentHarness:
    """A demo-like agent over the in-memory stores; tool executions are counted."""

    def __init__(
        self,
        script: Sequence[ModelResponse],
        *,
        policy: ApprovalPolicy | None = None,
        budget: Budget | None = None,
        outcome: UnknownOutcome = UnknownOutcome.RETRY,
        models: ModelResolver | None = None,
        model: Model | None = None,
    ) -> None:
        self.calls: Counter[str] = Counter()
        self.keys: list[str] = []
        self.crash_after_refund = False
        self.before_lookup: Callable[[], None] = lambda: None
        self.model = ScriptedModel(list(script), name="scripted")
        self.policy = policy or ApprovalPolicy(approvers=("U_DANA", "U_OMAR"))
        self.tools = self._tools(outcome)
        self.env = AgentEnvironment(
            Agent(
                name="t",
                model=model or self.model,
                system_prompt="be careful",
                tools=self.tools,
                budget=budget or Budget(),
            ),
            models=models,
        )
        self.agent = self.env.agent
        self.clock = self.env.clock
        self.store = self.env.store
        self.approval_store = self.env.approval_store
        self.approvals = self.env.approvals
        self.runtime = self.env.runtime

    def _tools(self, outcome: UnknownOutcome) -> Tools:
        calls, keys = self.calls, self.keys

        def lookup_order(order_id: str) -> dict[str, Any]:
            """Look an order up."""
            calls["lookup_order"] += 1
            self.before_lookup()
            return {"id": order_id, "amount_cents": 4999}

        def issue_refund(order_id: str, amount_cents: int, idempotency_key: str) -> dict[str, Any]:
            """Refund an order."""
            calls["issue_refund"] += 1
            keys.append(idempotency_key)
            if self.crash_after_refund:
                self.crash_after_refund = False
                raise Crash()
            return {"refunded": amount_cents, "order_id": order_id}

        def send_email(to: str, body: str, idempotency_key: str) -> str:
            """Email a customer."""
            calls["send_email"] += 1
            return "sent"

        return Tools(
            tool(retry=LOOKUP_RETRY)(lookup_order),
            tool(
                side_effect=True,
                approval=self.policy,
                on_unknown_outcome=outcome,
                verify=lambda key: {"refunded": "verified"} if key in keys else None,
            )(issue_refund),
            tool(side_effect=True, approval=self.policy)(send_email),
        )

    def start(self, task: str = "refund order 1042") -> RunId:
        """Start a run as the requester."""
        return self.env.start(task, requester=REQUESTER)

    def work(self) -> None:
        """Run whatever is due now."""
        self.runtime.worker(WorkerOptions(owner="w", lease_ttl=timedelta(seconds=30))).run_once()

    def refund_cut_off_by_a_crash(self) -> tuple[RunId, str]:
        """Start a run, approve its refund, crash the worker inside the refund (so the side
        effect started and was never journaled), and work the run again once the lease is
        gone; return the run and the refund's approval."""
        run_id = self.start()
        self.work()
        assert self.run(run_id).status == RunStatus.WAITING
        (approval,) = self.pending(run_id)
        self.approvals.decide(approval, DANA, Decision.APPROVE)
        self.crash_after_refund = True
        try:
            self.work()
        except Crash:
            pass
        else:
            raise AssertionError("the worker did not crash inside the refund")
        self.clock.advance(timedelta(minutes=1))
        self.work()
        return run_id, approval

    def run(self, run_id: RunId) -> Run:
        """Return the run."""
        return self.runtime.get(run_id)

    def pending(self, run_id: RunId) -> list[str]:
        """Return the ids of the run's pending approvals, oldest first."""
        return [a.id for a in self.env.pending(run_id)]

    def tool_results(self, run_id: RunId) -> list[str]:
        """Return what the model was told about each tool call, in order."""
        last = self.model.requests[-1]
        return [m.content for m in last.messages if m.role == "tool"]
