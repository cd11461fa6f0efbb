"""The vocabulary of journaled step names: built and recognised in one place, never changed."""

from __future__ import annotations

from agent_runtime import step_names
from agent_runtime.step_names import (
    APPROVAL_REQUEST,
    TOOL,
    TOOL_STARTED,
    TOOL_UNKNOWN_OUTCOME,
    TOOL_VERIFY,
    approval_waited,
    budget_key,
    is_budget_key,
    of_tool,
    tool_of,
    wake_key,
)


def test_the_names_are_the_ones_journals_already_hold() -> None:
    """Journals written before keep replaying: every name is spelled as it always was."""
    assert (step_names.MODEL, step_names.BUDGET_EXHAUSTED, step_names.AS_DECIDED) == (
        "model",
        "budget.exhausted",
        "tools.as_decided",
    )
    assert [of_tool(k, "refund") for k in (TOOL, TOOL_STARTED, TOOL_UNKNOWN_OUTCOME)] == [
        "tool:refund",
        "tool.started:refund",
        "tool.unknown_outcome:refund",
    ]
    assert of_tool(TOOL_VERIFY, "refund") == "tool.verify:refund"
    assert of_tool(APPROVAL_REQUEST, "refund") == "approval.request:refund"
    assert (wake_key("abc"), budget_key(2)) == ("approval:abc", "budget:2")


def test_a_tool_step_name_gives_back_its_tool_and_no_other_step_does() -> None:
    """``tool_of`` recognises a step of its kind only (``tool.started:x`` is no ``tool:``
    step), and keeps a tool name that itself holds a colon."""
    assert tool_of(TOOL, "tool:mcp:refund") == "mcp:refund"
    assert tool_of(TOOL, "tool.started:refund") is None
    assert tool_of(TOOL, "model") is None
    assert tool_of(TOOL_UNKNOWN_OUTCOME, "tool.unknown_outcome:refund") == "refund"
    assert is_budget_key("budget:1")
    assert not is_budget_key("approval:1")
    assert not is_budget_key(None)


def test_an_approval_wait_key_gives_back_its_approval_and_no_other_key_does() -> None:
    """`approval:ID` names the approval waited for; budget and plain keys name none."""
    assert approval_waited(wake_key("ap1")) == "ap1"
    assert approval_waited(budget_key(2)) is None
    assert approval_waited("approved") is None
    assert approval_waited(None) is None
