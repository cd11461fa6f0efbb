"""``SIGNOFF_DEMO_BUDGET_USD`` sets the demo agent's cost limit, and only a positive amount."""

from __future__ import annotations

import pytest

from bot.app.settings import Settings, SettingsError
from devkit.demo.agent import agent_from_settings


def test_the_demo_agent_takes_its_cost_limit_from_the_setting() -> None:
    """The demo agent's runs may cost $0.50 unless the setting names another amount."""
    default = agent_from_settings(Settings.from_env({"SIGNOFF_DEMO": "1"}))
    tight = agent_from_settings(
        Settings.from_env({"SIGNOFF_DEMO": "1", "SIGNOFF_DEMO_BUDGET_USD": "0.0015"})
    )
    assert default.budget is not None
    assert default.budget.cost_usd == 0.50
    assert tight.budget is not None
    assert tight.budget.cost_usd == 0.0015


@pytest.mark.parametrize("raw", ["lots", "0", "-1", "nan", "inf"])
def test_a_demo_budget_that_is_not_a_positive_amount_is_refused(raw: str) -> None:
    """A typo in the setting stops the start with a message naming it."""
    with pytest.raises(SettingsError, match="SIGNOFF_DEMO_BUDGET_USD"):
        Settings.from_env({"SIGNOFF_DEMO_BUDGET_USD": raw})
