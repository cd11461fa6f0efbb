"""Budgets: limits on what a run may consume, and what it consumed (rebuilt from the journal)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agent_runtime import definitions
from agent_runtime.models.base import Usage


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """USD per million input and output tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, usage: Usage) -> float:
        """Return the USD cost of ``usage``."""
        return (
            usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok
        ) / 1_000_000


class PriceTable:
    """Prices by model name; extend it with ``with_prices``."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self._prices = dict(prices or {})

    def with_prices(self, prices: Mapping[str, Price]) -> PriceTable:
        """Return a table with ``prices`` added or replaced."""
        return PriceTable({**self._prices, **prices})

    def get(self, model: str) -> Price | None:
        """Return the price of ``model``, if known."""
        return self._prices.get(model)

    def __contains__(self, model: object) -> bool:
        return model in self._prices


DEFAULT_PRICES = PriceTable(
    {
        "gpt-4o": Price(input_per_mtok=2.5, output_per_mtok=10.0),
        "gpt-4o-mini": Price(input_per_mtok=0.15, output_per_mtok=0.6),
        "gpt-4.1": Price(input_per_mtok=2.0, output_per_mtok=8.0),
        "gpt-4.1-mini": Price(input_per_mtok=0.4, output_per_mtok=1.6),
        "claude-sonnet-4-5": Price(input_per_mtok=3.0, output_per_mtok=15.0),
        "claude-haiku-4-5": Price(input_per_mtok=1.0, output_per_mtok=5.0),
        "claude-opus-4-1": Price(input_per_mtok=15.0, output_per_mtok=75.0),
    }
)
"""List prices at the time of writing; pass your own table for the models you use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Per-run limits; None means unlimited."""

    tokens: int | None = None
    cost_usd: float | None = None
    model_calls: int | None = None
    tool_calls: int | None = None
    wall_time: timedelta | None = None

    def __post_init__(self) -> None:
        for name in ("tokens", "model_calls", "tool_calls"):
            value = definitions.optional_count(getattr(self, name), f"the budget's {name}", least=0)
            object.__setattr__(self, name, value)
        definitions.optional_amount(self.cost_usd, "the budget's cost_usd")
        definitions.optional_duration(self.wall_time, "the budget's wall_time")

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "wall_time_seconds": None if self.wall_time is None else self.wall_time.total_seconds(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Budget:
        """Read the JSON form (missing keys are unlimited)."""
        wall = data.get("wall_time_seconds")
        return cls(
            tokens=data.get("tokens"),
            cost_usd=data.get("cost_usd"),
            model_calls=data.get("model_calls"),
            tool_calls=data.get("tool_calls"),
            wall_time=None if wall is None else timedelta(seconds=wall),
        )

    def raised(self, changes: Mapping[str, Any]) -> Budget:
        """Return the budget with the limits in ``changes`` (JSON form) replaced."""
        return dataclasses.replace(
            self,
            **{
                f.name: getattr(Budget.from_json(changes), f.name)
                for f in dataclasses.fields(self)
                if f.name in changes or (f.name == "wall_time" and "wall_time_seconds" in changes)
            },
        )


MIN_OUTPUT_TOKENS = 16
"""A model call with room for fewer output tokens than this is not worth making."""


@dataclass(slots=True)
class Consumption:
    """What a run has used so far; rebuilt identically on every replay of its journal."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def add_model_call(self, usage: Usage, price: Price | None) -> None:
        """Count one model call."""
        self.model_calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cost_usd += 0.0 if price is None else price.cost(usage)

    def plan_model_call(
        self,
        budget: Budget,
        *,
        elapsed: timedelta,
        input_tokens: int,
        max_output: int,
        price: Price | None,
    ) -> int | str:
        """Return the output-token cap for the next model call, or the name of the limit
        that leaves no room for it (``MIN_OUTPUT_TOKENS`` at least must fit)."""
        if budget.model_calls is not None and self.model_calls >= budget.model_calls:
            return "model_calls"
        if budget.wall_time is not None and elapsed >= budget.wall_time:
            return "wall_time"
        cap = max_output
        if budget.tokens is not None:
            cap = min(cap, budget.tokens - self.tokens - input_tokens)
        if budget.cost_usd is not None and price is not None:
            left = (
                budget.cost_usd - self.cost_usd
            ) * 1_000_000 - input_tokens * price.input_per_mtok
            cap = min(cap, int(left / price.output_per_mtok) if price.output_per_mtok else cap)
        if cap >= MIN_OUTPUT_TOKENS:
            return cap
        return (
            "tokens"
            if budget.tokens is not None
            and (budget.tokens - self.tokens - input_tokens < MIN_OUTPUT_TOKENS)
            else "cost_usd"
        )

    def tool_call_allowed(self, budget: Budget) -> bool:
        """Tell whether one more tool call fits the budget."""
        return budget.tool_calls is None or self.tool_calls < budget.tool_calls

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
        }


def budget_left(budget: Budget, used: Consumption) -> dict[str, Any]:
    """Return what is left of each limit of ``budget`` after ``used``."""
    left: dict[str, Any] = {}
    if budget.tokens is not None:
        left["tokens"] = budget.tokens - used.tokens
    if budget.cost_usd is not None:
        left["cost_usd"] = round(budget.cost_usd - used.cost_usd, 6)
    if budget.model_calls is not None:
        left["model_calls"] = budget.model_calls - used.model_calls
    return left


@dataclass(frozen=True, slots=True, kw_only=True)
class RaiseBudget:
    """A person raised a run's exhausted budget: ``limits`` (JSON form) replace the old ones."""

    limits: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndRun:
    """A person ended the run whose budget was exhausted, or the raise was declined or
    expired; ``how`` says which, who and when (the result's ``ended_by``), when known."""

    how: dict[str, Any] | None = None


BudgetDecision = RaiseBudget | EndRun
"""What a person decided about an exhausted budget."""


def read_budget_decision(data: Mapping[str, Any]) -> BudgetDecision:
    """Read the decision a run waiting for its budget receives (anything but a raise ends it)."""
    if data.get("action") == "raise":
        return RaiseBudget(limits=data.get("limits") or {})
    by = data.get("by")
    return EndRun(how={"status": "ended", "by": by} if isinstance(by, dict) else None)
