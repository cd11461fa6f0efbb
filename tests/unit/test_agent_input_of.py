"""A run's input, read as an agent's input where it is one and as nothing otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime import Actor, AgentInput, Budget


def test_an_agent_runs_input_reads_as_its_typed_input() -> None:
    """An agent run's stored input gives back its task, requester, budget and model."""
    started = AgentInput(
        task="refund order 1042",
        requester=Actor(user_id="U_REQ", team_id="T1"),
        budget=Budget(cost_usd=0.5),
        context={"slack": {"channel": "C1"}},
        model="openai:gpt-4o-mini",
    )
    assert AgentInput.of(started.to_json()) == started


@pytest.mark.parametrize(
    "data",
    [
        None,
        {"n": 3, "delay_ms": 10},
        {"task": "   "},
        {"task": "t", "requester": "U_REQ"},
        {"task": "t", "requester": {"team_id": "T1"}},
        {"task": "t", "budget": [1]},
        ["task"],
    ],
)
def test_another_workflows_input_reads_as_none(data: Any) -> None:
    """Input no agent run could have started with (another workflow's, or malformed)
    reads as None instead of raising, so views fall back as for any other workflow."""
    assert AgentInput.of(data) is None
