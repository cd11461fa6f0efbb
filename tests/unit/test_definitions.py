"""What an agent's author writes is checked where it is written: a policy, a budget, an agent
and its tools of the wrong type are refused at definition, not read otherwise or failed at
the first run."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from agent_runtime import Agent, ApprovalPolicy, Budget, Tools, tool
from agent_runtime.models import ScriptedModel, ToolCall, text_reply, tool_reply
from agent_runtime.testing import AgentEnvironment


def delete_account(account_id: str) -> str:
    """Delete an account."""
    return f"deleted {account_id}"


GATED = tool(side_effect=True, approval=ApprovalPolicy(approvers=("U_DANA",)))(delete_account)


def _agent(**changes: Any) -> Agent:
    fields: dict[str, Any] = {
        "name": "deleter",
        "model": ScriptedModel([]),
        "system_prompt": "delete carefully",
        "tools": Tools(GATED),
    } | changes
    return Agent(**fields)


@pytest.mark.parametrize(
    ("changes", "error", "says"),
    [
        ({"approvers": "U_DANA"}, TypeError, "approvers=('U_DANA',)"),
        ({"approvers": ("U_A",), "groups": "ops"}, TypeError, "groups=('ops',)"),
        ({"approvers": ("U_A",), "escalate_to": "U_B"}, TypeError, "escalate_to=('U_B',)"),
        ({"approvers": ("U_A", "")}, TypeError, "non-empty strings"),
        ({"approvers": ("U_A",), "deadline": 3600}, TypeError, "timedelta"),
        ({"approvers": ("U_A",), "deadline": timedelta(0)}, ValueError, "positive"),
        ({"approvers": ("U_A",), "required": "2"}, TypeError, "whole number"),
        ({"approvers": ("U_A",), "required": 0}, ValueError, "at least 1"),
        ({"approvers": ("U_A",), "allow_requester": "yes"}, TypeError, "True or False"),
        ({"approvers": ("U_A",), "remind_every": 60}, TypeError, "timedelta"),
        ({"approvers": ("U_A",), "on_expiry": "explode"}, ValueError, "explode"),
    ],
)
def test_a_policy_of_the_wrong_type_is_refused_naming_its_field(
    changes: dict[str, Any], error: type[Exception], says: str
) -> None:
    """A lone string where names go (which would be read as its characters), a deadline in
    seconds, a quorum as text: each is refused, saying what to write."""
    with pytest.raises(error, match=says.replace("(", r"\(").replace(")", r"\)")):
        ApprovalPolicy(**changes)


def test_a_policy_keeps_a_list_of_names_as_a_tuple() -> None:
    """Names given as a list are the same policy as names given as a tuple."""
    listed = ApprovalPolicy(approvers=["U_A", "U_B"], groups=["ops"])  # type: ignore[arg-type]
    assert listed == ApprovalPolicy(approvers=("U_A", "U_B"), groups=("ops",))


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"model_calls": "5"}, TypeError),
        ({"tokens": True}, TypeError),
        ({"tokens": -1}, ValueError),
        ({"cost_usd": "1.5"}, TypeError),
        ({"cost_usd": float("nan")}, ValueError),
        ({"wall_time": 60}, TypeError),
    ],
)
def test_a_budget_of_the_wrong_type_is_refused(changes: dict[str, Any], error: type) -> None:
    """A limit given as text, a bool, a negative or NaN amount, or seconds for a duration
    is refused when the budget is made (it failed every run's first check before)."""
    with pytest.raises(error, match="the budget's"):
        Budget(**changes)


def test_an_agent_given_a_list_of_tools_runs_them_as_tools() -> None:
    """``tools=[...]`` is the agent's tools, as ``Tools(...)`` is: the same run either way."""
    listed = _agent(tools=[GATED])
    assert isinstance(listed.tools, Tools)
    assert [t.name for t in listed.tools] == ["delete_account"]
    call = ToolCall(id="c1", name="delete_account", arguments={"account_id": "a1"})
    env = AgentEnvironment(listed, [tool_reply(call), text_reply("done")])
    run_id = env.start("delete a1")
    env.run_until_waiting(run_id)
    (approval,) = env.pending(run_id)
    assert env.approve(approval, as_user="U_DANA").accepted
    env.run_until_waiting(run_id)
    assert [c.result for c in env.tool_calls] == ["deleted a1"]


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"tools": "delete_account"}, "tools must be"),
        ({"tools": [delete_account]}, "make delete_account one with @tool"),
        ({"approver_groups": {"ops": "U_A"}}, r"approver_groups\['ops'\]"),
        ({"budget_approvers": "U_A"}, "budget_approvers"),
        ({"budget": {"tokens": 5}}, "budget must be a Budget"),
        ({"max_turns": "25"}, "max_turns"),
        ({"system_prompt": None}, "system_prompt"),
    ],
)
def test_an_agent_of_the_wrong_type_is_refused_at_definition(
    changes: dict[str, Any], says: str
) -> None:
    """Tools as a string or as plain functions, a group's members as one string, a budget
    as a dict: refused when the agent is defined, naming what is wrong."""
    with pytest.raises(TypeError, match=says):
        _agent(**changes)


def test_an_async_tool_is_refused_where_it_is_made() -> None:
    """``async def`` tools were accepted and never awaited: the model got a coroutine (and a
    side-effecting one would have used its approval for nothing)."""

    async def fetch(url: str) -> str:
        """Fetch a page."""
        await asyncio.sleep(0)
        return url

    with pytest.raises(TypeError, match="async def"):
        tool(fetch)
