"""The built-in agent loop as a durable workflow: model → tool calls → approvals → tools → model.

Every model call, approval request, wait and tool call is a journaled step, so the loop
replays to where it stopped with no model call paid twice and no side effect repeated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from agent_runtime.agent import Agent, AgentInput
from agent_runtime.approval_service import Approvals, wake_key
from agent_runtime.approvals import ApprovalKind
from agent_runtime.budget import (
    Budget,
    BudgetDecision,
    Consumption,
    EndRun,
    RaiseBudget,
    read_budget_decision,
)
from agent_runtime.budget_ask import ModelCall, budget_tool, decided_limits, ending, raise_request
from agent_runtime.context import RunContext
from agent_runtime.decisions import Approved, Decided, read_decision
from agent_runtime.exceptions import InvalidConfiguration, SignoffError, StepFailed
from agent_runtime.json_limits import json_problem, refusal_of, refused_arguments
from agent_runtime.models.base import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
)
from agent_runtime.request_digest import ConversationDigest, is_chained, legacy_request_hash
from agent_runtime.side_effects import SideEffects, ToolResult
from agent_runtime.step_names import AS_DECIDED, BUDGET_EXHAUSTED, MODEL, budget_key
from agent_runtime.tools import Tool
from agent_runtime.workflows import WorkflowFn


class TurnLimitReached(SignoffError):
    """The agent used all its turns without giving a final answer."""


ModelResolver = Callable[[str], Model]
"""Builds the model a run's input names (``AgentInput.model``); ``ValueError`` if unknown."""


def agent_workflow(
    agent: Agent, approvals: Approvals, models: ModelResolver | None = None
) -> WorkflowFn:
    """Return the workflow that runs ``agent`` durably (with the model a run asks for)."""

    def workflow(ctx: RunContext, data: Any) -> dict[str, Any]:
        request = AgentInput.from_json(data)
        return AgentLoop(with_model(agent, request.model, models), approvals, ctx, request).run()

    return workflow


def with_model(agent: Agent, spec: str | None, models: ModelResolver | None) -> Agent:
    """Return ``agent`` using the model ``spec`` names (``agent`` itself when none is named)."""
    if spec is None:
        return agent
    if models is None:
        raise InvalidConfiguration(f"this deployment cannot resolve the model {spec!r}")
    return replace(agent, model=models(spec))


class InputEstimate:
    """Estimates a request's input tokens: about four characters a token, counting the
    system prompt, each message's JSON and each tool's JSON.

    The conversation only grows, so each message is measured once: a long run's estimates
    cost a sum of integers per turn, not a JSON encoding of the whole conversation. The
    estimate caps output tokens, which are part of a model step's journaled input, so its
    value must never change for a given request.
    """

    def __init__(self, system: str, tools: Sequence[ToolSpec]) -> None:
        self._fixed = len(system) + sum(len(json.dumps(t.to_json())) for t in tools)
        self._sizes: list[int] = []

    def tokens(self, messages: Sequence[Message]) -> int:
        """Estimate the input tokens of a request with ``messages`` (this conversation's)."""
        self._sizes.extend(len(json.dumps(m.to_json())) for m in messages[len(self._sizes) :])
        return (self._fixed + sum(self._sizes)) // 4 + 1


def request_json(request: ModelRequest) -> dict[str, Any]:
    """Return the JSON form of a model request (the model step's input)."""
    return {
        "system": request.system,
        "messages": [m.to_json() for m in request.messages],
        "tools": [t.to_json() for t in request.tools],
        "max_output_tokens": request.max_output_tokens,
    }


class AgentLoop:
    """One run of an agent; rebuilt from scratch (and from the journal) on every resume."""

    def __init__(self, agent: Agent, approvals: Approvals, ctx: RunContext, data: AgentInput):
        self.agent = agent
        self.ctx = ctx
        self.input = data
        self.budget: Budget = data.budget or agent.budget
        self.used = Consumption()
        self.messages: list[Message] = [Message(role="user", content=data.task)]
        self.effects = SideEffects(
            ctx, approvals, agent, data.requester, self.used, channel=data.channel
        )
        self._estimate = InputEstimate(agent.system_prompt, agent.tools.specs())
        self._conversation = ConversationDigest(
            agent.system_prompt, [t.to_json() for t in agent.tools.specs()]
        )
        self._budget_waits = 0
        self._budget_end: dict[str, Any] | None = None
        self._calls: list[ModelCall] = []

    def run(self) -> dict[str, Any]:
        """Run turns until the model answers without tool calls, or the budget is ended."""
        started = self.ctx.now()
        for _ in range(self.agent.max_turns):
            response = self._model_turn(started)
            if response is None:
                return self._result(None, ended="budget")
            self.messages.append(response.message)
            if not response.message.tool_calls:
                return self._result(response.message.content)
            self.messages.extend(self._tool_turn(response.message.tool_calls))
        raise TurnLimitReached(f"no final answer after {self.agent.max_turns} turns")

    def _model_turn(self, started: datetime) -> ModelResponse | None:
        draft = ModelRequest(
            system=self.agent.system_prompt,
            messages=tuple(self.messages),
            tools=tuple(self.agent.tools.specs()),
        )
        cap = self._budget_gate(started, self._estimate.tokens(draft.messages))
        if cap is None:
            return None
        request = ModelRequest(
            system=draft.system, messages=draft.messages, tools=draft.tools, max_output_tokens=cap
        )
        position = self.ctx.position
        output = self.ctx.step_hashed(
            self._call_model,
            lambda: request,
            self._request_hash(request),
            name=MODEL,
            retry=self.agent.model_retry,
        )
        response = ModelResponse.from_json(output)
        model = response.model or self.agent.llm.name
        before = self.used.cost_usd
        self.used.add_model_call(response.usage, self.agent.prices.get(model))
        self._calls.append(
            ModelCall(
                position=position,
                model=model,
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
                cost_usd=self.used.cost_usd - before,
            )
        )
        return response

    def _request_hash(self, request: ModelRequest) -> str:
        """Hash ``request`` as the model step being replayed was hashed (format 2 when live)."""
        recorded = self.ctx.recorded_input_hash()
        if recorded is not None and not is_chained(recorded):
            return legacy_request_hash(request_json(request))
        self._conversation.catch_up(request.messages)
        return self._conversation.request_hash(request.max_output_tokens)

    def _call_model(self, request: ModelRequest) -> dict[str, Any]:
        # the request itself is journaled only as a hash: keep which model was asked
        response = screened(self.agent.llm.complete(request))
        return response.to_json() | {"requested_model": self.agent.llm.name}

    def _budget_gate(self, started: datetime, input_tokens: int) -> int | None:
        """Return the output-token cap for the next call, waiting for a person if exhausted."""
        while True:
            elapsed = timedelta(0) if self.budget.wall_time is None else self.ctx.now() - started
            plan = self.used.plan_model_call(
                self.budget,
                elapsed=elapsed,
                input_tokens=input_tokens,
                max_output=self.agent.max_output_tokens,
                price=self.agent.prices.get(self.agent.llm.name),
            )
            if isinstance(plan, int):
                return plan
            match self._wait_for_budget(plan):
                case RaiseBudget(limits=limits):
                    self.budget = self.budget.raised(limits)
                case EndRun(how=how):
                    self._budget_end = how
                    return None

    def _wait_for_budget(self, limit: str) -> BudgetDecision:
        self._budget_waits += 1
        key = budget_key(self._budget_waits)
        self.ctx.step(
            _record,
            {
                "limit": limit,
                "used": self.used.to_json(),
                "budget": self.budget.to_json(),
                "wait_key": key,
            },
            name=BUDGET_EXHAUSTED,
        )
        tool = budget_tool(self.agent)
        if tool is None or (self.ctx.replaying and self.ctx.next_step_name() == key):
            # nobody may raise it, or a journal from before raises were approvals: the
            # run waits for ``budget_control.decide_budget`` to deliver the decision
            return read_budget_decision(self.ctx.wait_for(key))
        args = raise_request(
            limit,
            self.budget,
            self.used,
            self._calls,
            turns_left=self.agent.max_turns - self.used.model_calls,
        )
        asked = self.effects.request_approval(tool, args, kind=ApprovalKind.BUDGET)
        decided = read_decision(self.ctx.wait_for(wake_key(asked)))
        limits = decided_limits(decided)
        return EndRun(how=ending(decided)) if limits is None else RaiseBudget(limits=limits)

    def _tool_turn(self, calls: tuple[ToolCall, ...]) -> list[Message]:
        """Run a turn's calls in order, each as soon as it (and every call before it) is decided.

        Journals written before calls ran as decided waited for every decision first; they
        replay that way, so a run in flight across an upgrade stays deterministic.
        """
        plans = [self._plan(call) for call in calls]
        if not any(plan.approval_id for plan in plans) or self._runs_as_decided():
            return [self._answer(plan, self._decision(plan)) for plan in plans]
        decisions = [self._decision(plan) for plan in plans]
        return [
            self._answer(plan, decision) for plan, decision in zip(plans, decisions, strict=True)
        ]

    def _runs_as_decided(self) -> bool:
        """Journal (or replay) the mark of a turn whose calls run as they are decided."""
        if self.ctx.replaying and self.ctx.next_step_name() != AS_DECIDED:
            return False
        self.ctx.step(_record, {}, name=AS_DECIDED)
        return True

    def _decision(self, plan: ToolPlan) -> Decided | None:
        """Wait for the person deciding ``plan``'s call, if it needs one."""
        if not plan.approval_id:
            return None
        return read_decision(self.ctx.wait_for(wake_key(plan.approval_id)))

    def _plan(self, call: ToolCall) -> ToolPlan:
        tool = self.agent.tools.get(call.name)
        if tool is None:
            known = ", ".join(t.name for t in self.agent.tools)
            return ToolPlan(
                call, None, ToolResult.error(f"unknown tool {call.name!r}; use: {known}")
            )
        refused = refusal_of(call.arguments)
        if refused is not None:
            return ToolPlan(call, tool, ToolResult.error(f"invalid arguments: {refused}"))
        errors = tool.validation_errors(call.arguments)
        if errors:
            return ToolPlan(call, tool, ToolResult.error("invalid arguments: " + "; ".join(errors)))
        if tool.approval is None:
            return ToolPlan(call, tool, None)
        return ToolPlan(call, tool, None, self.effects.request_approval(tool, call.arguments))

    def _answer(self, plan: ToolPlan, decision: Decided | None) -> Message:
        result = plan.result
        if result is None and plan.tool is not None:
            result = self._run_tool(plan.tool, plan.call.arguments, decision)
        assert result is not None
        return Message(
            role="tool", tool_call_id=plan.call.id, content=result.content, is_error=result.is_error
        )

    def _run_tool(self, tool: Tool, args: dict[str, Any], decision: Decided | None) -> ToolResult:
        match decision:
            case None:
                approved, call_args = None, args
            case Approved():
                approved, call_args = decision, decision.args
            case _:
                return ToolResult.declined(decision)
        if not self.used.tool_call_allowed(self.budget):
            return ToolResult.error("the run's tool-call budget is used up; not executed")
        try:
            return self.effects.execute(tool, call_args, approved)
        except StepFailed as failure:
            return ToolResult.error(f"{failure.error_type}: {failure.message}")

    def _result(self, answer: str | None, *, ended: str | None = None) -> dict[str, Any]:
        result = {
            "answer": answer,
            "ended": ended,
            "usage": self.used.to_json(),
            "budget": self.budget.to_json(),
        }
        if ended == "budget" and self._budget_end is not None:
            result["ended_by"] = self._budget_end
        return result


class ToolPlan:
    """What to do with one proposed tool call."""

    def __init__(
        self,
        call: ToolCall,
        tool: Tool | None,
        result: ToolResult | None,
        approval_id: str | None = None,
    ) -> None:
        self.call = call
        self.tool = tool
        self.result = result
        self.approval_id = approval_id


def screened(response: ModelResponse) -> ModelResponse:
    """The response with every tool call's unusable arguments (``json_problem``) replaced by
    their refusal, before it is journaled: the model is told, the run goes on."""
    calls = response.message.tool_calls
    problems = [json_problem(call.arguments) for call in calls]
    if not any(problems):
        return response
    checked = tuple(
        call if problem is None else replace(call, arguments=refused_arguments(problem))
        for call, problem in zip(calls, problems, strict=True)
    )
    return replace(response, message=replace(response.message, tool_calls=checked))


def _record(data: dict[str, Any]) -> dict[str, Any]:
    return data
