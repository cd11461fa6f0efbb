"""Tool definitions: schemas derived from hints, and options refused at definition time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agent_runtime import tool


def test_a_fixed_length_tuple_is_described_item_by_item() -> None:
    """A ``tuple[int, str]`` parameter accepts an int then a str, and refuses other shapes."""

    def pick(pair: tuple[int, str]) -> str:
        """Pick a pair."""
        return pair[1]

    made = tool(pick)
    assert made.validation_errors({"pair": [1, "a"]}) == []
    assert made.validation_errors({"pair": [1, 2]}) != []
    assert made.validation_errors({"pair": [1, "a", "b"]}) != []


def test_a_variable_length_tuple_is_an_array_of_its_item() -> None:
    """A ``tuple[int, ...]`` parameter accepts any number of integers."""

    def total(numbers: tuple[int, ...]) -> int:
        """Add numbers up."""
        return sum(numbers)

    made = tool(total)
    assert made.validation_errors({"numbers": [1, 2, 3]}) == []
    assert made.validation_errors({"numbers": [1, "a"]}) != []


def test_a_side_effecting_tool_cannot_have_a_timeout() -> None:
    """A timed-out call keeps running in its thread, so a retry would run the effect twice."""

    def charge(amount: int) -> str:
        """Charge."""
        return "ok"

    with pytest.raises(ValueError, match="timeout"):
        tool(side_effect=True, timeout=timedelta(seconds=5))(charge)
