"""A raise of an exhausted budget, asked for as an approval like any other.

When a run's next model call no longer fits its budget, the run asks for a raise: an
approval of kind ``budget`` for the agent's stand-in tool ``budget:<agent>``, under the
agent's ``raise_policy``. Its arguments are what approvers are shown and what the audit
log keeps: the spend of each model call (as the journal recorded it), the limits, what is
left of them, a projection, and the limits proposed (``raise_to``). Raising is deciding
that approval with edited ``raise_to`` (quorum, compare-and-set and audit as for any
approval); ending the run cancels it, the approval closed in the same transaction.

The projection assumes the run needs as many more model calls as it has made (at most
the turns it has left) at the average cost and tokens of its calls so far; the proposed
raise is what that projection needs beyond what is left, rounded up to two significant
digits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from agent_runtime.agent import Agent
from agent_runtime.budget import Budget, Consumption, budget_left
from agent_runtime.decisions import (
    Approved,
    Cancelled,
    Decided,
    Expired,
    Rejected,
    status_of,
)
from agent_runtime.exceptions import InvalidInput
from agent_runtime.tools import Tool

BUDGET_TOOL_PREFIX = "budget:"
CALLS_KEPT = 20
"""The most recent model calls a raise's arguments list (the totals count them all)."""
MAX_RAISE_FACTOR = 1000
"""A raise may set a limit to at most this many times its current value (a typo guard)."""
LIMIT_KEYS = {
    "tokens": "tokens",
    "cost_usd": "cost_usd",
    "model_calls": "model_calls",
    "tool_calls": "tool_calls",
    "wall_time": "wall_time_seconds",
}
"""The name of each limit as ``plan_model_call`` reports it, and as ``Budget.to_json`` has it."""
_INTEGERS = ("tokens", "model_calls", "tool_calls")

RAISE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "required": ["limit", "budget", "raise_to"],
    "properties": {
        "limit": {"type": "string", "enum": sorted(LIMIT_KEYS)},
        "budget": {"type": "object"},
        "raise_to": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": False,
            "properties": {
                key: {"type": "integer" if key in _INTEGERS else "number", "exclusiveMinimum": 0}
                for key in LIMIT_KEYS.values()
            },
        },
    },
}
"""What a raise's (edited) arguments must look like."""


def budget_tool_name(agent: str) -> str:
    """Return the name approvals record for raising the budget of ``agent``'s runs."""
    return f"{BUDGET_TOOL_PREFIX}{agent}"


def is_budget_approval_tool(name: str) -> bool:
    """Tell whether ``name`` is a budget stand-in tool's."""
    return name.startswith(BUDGET_TOOL_PREFIX)


def budget_tool(agent: Agent) -> Tool | None:
    """Return the stand-in approvals know a raise of ``agent``'s budgets by: its schema is
    ``RAISE_PARAMETERS``, its policy the agent's ``raise_policy`` (None if nobody may raise)."""
    policy = agent.raise_policy()
    if policy is None:
        return None
    return Tool(
        name=budget_tool_name(agent.name),
        description=f"raise the exhausted budget of a run of agent {agent.name}",
        fn=_never_called,
        parameters=RAISE_PARAMETERS,
        side_effect=True,
        approval=policy,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall:
    """What one journaled model call used."""

    position: int
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "position": self.position,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 6),
        }


def raise_request(
    limit: str,
    budget: Budget,
    used: Consumption,
    calls: Sequence[ModelCall],
    *,
    turns_left: int,
) -> dict[str, Any]:
    """Return the arguments of the approval asking to raise ``limit`` of ``budget``."""
    ahead = projection(used, turns_left)
    return {
        "limit": limit,
        "budget": {k: v for k, v in budget.to_json().items() if v is not None},
        "used": used.to_json(),
        "left": budget_left(budget, used),
        "calls": [c.to_json() for c in calls[-CALLS_KEPT:]],
        "projection": ahead,
        "raise_to": {LIMIT_KEYS[limit]: suggested_limit(limit, budget, used, ahead)},
    }


def projection(used: Consumption, turns_left: int) -> dict[str, Any]:
    """Return the average cost and tokens of a model call so far, how many more calls the
    run may need (as many as it made, at most ``turns_left``), and what those would use."""
    made = used.model_calls
    per_cost = used.cost_usd / made if made else 0.0
    per_tokens = used.tokens / made if made else 0.0
    more = max(1, min(made, turns_left))
    return {
        "calls_so_far": made,
        "cost_usd_per_call": round(per_cost, 6),
        "tokens_per_call": round(per_tokens),
        "more_calls": more,
        "cost_usd": round(per_cost * more, 6),
        "tokens": math.ceil(per_tokens * more),
    }


def suggested_limit(limit: str, budget: Budget, used: Consumption, ahead: dict[str, Any]) -> Any:
    """Return the new value proposed for ``limit``: its current value plus what the
    projection needs beyond what is left (at least one average call's worth)."""
    current = current_limit(budget, limit)
    left = budget_left(budget, used)
    if limit == "cost_usd":
        need = max(ahead["cost_usd"] - left.get("cost_usd", 0.0), ahead["cost_usd_per_call"])
    elif limit == "tokens":
        need = max(ahead["tokens"] - left.get("tokens", 0), ahead["tokens_per_call"])
    elif limit == "model_calls":
        need = ahead["more_calls"]
    else:
        need = 0
    step = round_up(need) if need > 0 else current or 1
    total = current + step
    return int(total) if LIMIT_KEYS[limit] in _INTEGERS else round(total, 6)


def current_limit(budget: Budget, limit: str) -> Any:
    """Return the current value of ``limit`` in ``budget`` (its JSON form; 0 if unlimited)."""
    return budget.to_json().get(LIMIT_KEYS[limit]) or 0


def round_up(value: float) -> float:
    """Round ``value`` (positive) up to two significant digits: 0.00123 → 0.0013."""
    scale = 10 ** (math.floor(math.log10(value)) - 1)
    return float(round(math.ceil(round(value / scale, 9)) * scale, 12))


def raised_arguments(asked: Mapping[str, Any], limits: Mapping[str, Any]) -> dict[str, Any]:
    """Return the arguments of a raise to ``limits`` (``Budget.to_json`` names) of the
    approval that asked ``asked``; ``InvalidInput`` unless they raise the limit the run
    stopped at, and each is above its current value and at most ``MAX_RAISE_FACTOR`` times
    it."""
    if not limits:
        raise InvalidInput("budget", "name at least one limit to raise")
    exhausted = asked.get("limit")
    if exhausted in LIMIT_KEYS and LIMIT_KEYS[exhausted] not in limits:
        raise InvalidInput(  # raising only others would stop the run again at once
            "budget", f"the run stopped at its {exhausted} limit: raise that one"
        )
    current = asked.get("budget") or {}
    for key, value in limits.items():
        if key not in LIMIT_KEYS.values() or isinstance(value, bool):
            raise InvalidInput("budget", f"{key} is not a limit that can be raised")
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidInput("budget", f"{key} must be a number")
        was = current.get(key)
        if was is not None and value <= was:
            raise InvalidInput("budget", f"{key} must be above its current limit {was}")
        if was and value > was * MAX_RAISE_FACTOR:
            raise InvalidInput(
                "budget", f"{key} may be raised to at most {MAX_RAISE_FACTOR} times {was}"
            )
    return {**asked, "raise_to": dict(limits)}


def decided_limits(decision: Decided) -> dict[str, Any] | None:
    """Return the limits a budget approval's decision raises to, or None when it was not
    approved (the run ends)."""
    match decision:
        case Approved(args=args):
            raised = args.get("raise_to")
            return dict(raised) if isinstance(raised, dict) else None
        case _:
            return None


def ending(decision: Decided) -> dict[str, Any]:
    """Return how a declined budget approval ended its run, for the result's ``ended_by``:
    the status (``rejected``, ``expired``, ``cancelled``), who decided, when and why."""
    by, reason = None, None
    match decision:
        case Rejected() | Cancelled():
            by, reason = decision.by, decision.reason
        case Expired():
            reason = decision.reason
        case Approved():
            by = decision.by
    return {
        "status": status_of(decision).value,
        "by": None if by is None else by.to_json(),
        "at": None if decision.at is None else decision.at.isoformat(),
        "reason": reason,
    }


def _never_called(**_: Any) -> NoReturn:
    raise RuntimeError("a budget raise is applied by its run, never called as a tool")
