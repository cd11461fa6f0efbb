"""The demo agent: refunds orders and emails customers, with every side effect signed off."""

from __future__ import annotations

from agent_runtime import Agent, Budget
from agent_runtime.budget import DEFAULT_PRICES, Price
from agent_runtime.models.base import Model
from bot.app.models import configured_model
from bot.app.settings import DEMO_APPROVERS, Settings
from devkit.demo.model import demo_model
from devkit.demo.tools import demo_tools

SYSTEM_PROMPT = (
    "You are a customer-support agent. Look orders up before acting. Refunds and emails "
    "need a person's approval; if one is rejected, say so and do not retry it."
)
DEMO_PRICE = Price(input_per_mtok=3.0, output_per_mtok=15.0)


def demo_agent(
    *,
    provider_url: str,
    approvers: tuple[str, ...],
    model: Model | None = None,
    groups: dict[str, tuple[str, ...]] | None = None,
    required: int = 1,
    budget_usd: float = 0.50,
) -> Agent:
    """Return the demo agent calling the provider at ``provider_url``; a priced model's runs
    may cost ``budget_usd`` each."""
    chosen = model or demo_model()
    prices = DEFAULT_PRICES.with_prices({"demo-scripted": DEMO_PRICE})
    priced = chosen.name in prices
    return Agent(
        name="demo",
        model=chosen,
        system_prompt=SYSTEM_PROMPT,
        tools=demo_tools(provider_url, approvers, required=required),
        budget=Budget(cost_usd=budget_usd if priced else None, model_calls=20),
        prices=prices,
        approver_groups=groups or {},
    )


def agent_from_settings(settings: Settings) -> Agent:
    """Return the demo agent as ``SIGNOFF_DEMO=1`` configures it."""
    return demo_agent(
        provider_url=settings.demo_provider_url,
        approvers=settings.approvers or DEMO_APPROVERS,
        model=configured_model(settings),
        groups=settings.approver_groups,
        required=settings.approvals_required,
        budget_usd=settings.demo_budget_usd,
    )
