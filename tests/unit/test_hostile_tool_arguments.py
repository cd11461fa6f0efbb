"""Whatever arguments a model proposes for a tool, the run goes on and the model is told why
they were refused; the tool never runs with arguments the journal could not hold.

Model adapters hand the agent loop any JSON value as a tool call's arguments; an OpenAI-style
model sends them as JSON text (``parse_arguments``). Before these tests, NaN or a lone
surrogate failed the whole run (the model step's output could not be journaled), 10,000
levels of nesting made the model step fail and be retried (the call silently dropped), a
10 MB string reached the tool, and deep JSON text crashed ``parse_arguments``.
"""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given

from agent_runtime import RunStatus
from agent_runtime.json_limits import REFUSED_ARGUMENTS_KEY
from agent_runtime.models import ToolCall, Usage, tool_reply
from agent_runtime.models.openai_chat import parse_arguments
from agent_runtime.serialization import canonical_json
from tests.hostile import (
    DUPLICATE_KEYS,
    HUGE_CHARS,
    NAN_TEXT,
    NUL_TEXT,
    SURROGATE_TEXT,
    deep_list,
    deep_text,
    huge_text,
    json_texts,
    json_values,
)
from tests.unit.agent_harness import DONE, AgentHarness

TEXT_IDS = [
    "10,000 levels deep",
    "10 MB",
    "duplicate keys",
    "NaN",
    "a lone surrogate",
    "a NUL character",
]


def asking(arguments: dict[str, Any]) -> AgentHarness:
    """An agent whose model asks for ``lookup_order(arguments)`` once, then answers.

    The reply states its usage, as a provider's does: the scripted model would otherwise
    estimate it from the JSON of the arguments, which is not what these tests are about.
    """
    call = ToolCall(id="c1", name="lookup_order", arguments=arguments)
    reply = replace(tool_reply(call), usage=Usage(input_tokens=10, output_tokens=10))
    return AgentHarness([reply, DONE])


def completed(harness: AgentHarness) -> list[str]:
    """Start and work a run, require that it completed; return the tool results it saw."""
    run_id = harness.start()
    harness.work()
    assert harness.run(run_id).status == RunStatus.COMPLETED, harness.run(run_id).error
    return harness.tool_results(run_id)


def storable(value: Any) -> bool:
    """Tell whether the journal can hold ``value`` (JSON without NaN, as UTF-8)."""
    try:
        canonical_json(value).encode()
    except Exception:
        return False
    return True


EXTREMES: dict[str, Callable[[], Any]] = {
    "10,000 levels deep": lambda: deep_list(),
    "NaN": lambda: math.nan,
    "minus infinity": lambda: -math.inf,
    "a lone surrogate": lambda: "\ud800",
    "a key with a lone surrogate": lambda: {"\udcff": 1},
    "a NUL character": lambda: "10\x0042",
    "a key with a NUL character": lambda: {"k\x00": 1},
}
"""Argument values at the extremes, built when a test asks (too deep for hypothesis to print)."""


def assert_answered(order_id: Any) -> None:
    """The run completes; the tool ran only with a storable string; else the model was told."""
    harness = asking({"order_id": order_id})
    [told] = completed(harness)
    if harness.calls["lookup_order"]:
        assert isinstance(order_id, str)
        assert storable(order_id)
    else:
        assert told.startswith("invalid arguments"), told[:300]


@given(order_id=json_values)
def test_any_argument_value_ends_in_a_tool_result(order_id: Any) -> None:
    """Any JSON-like value (NaN, surrogates, odd keys) ends in a tool result, never a failure."""
    assert_answered(order_id)


@pytest.mark.parametrize("name", EXTREMES)
def test_extreme_argument_values_end_in_a_tool_result(name: str) -> None:
    """The extreme values end in a tool result too, never a failed or retried model step."""
    assert_answered(EXTREMES[name]())


def test_a_ten_megabyte_argument_is_refused_in_bounded_memory() -> None:
    """A 10 MB string argument is refused, and handling it allocates far less than 10 MB."""
    harness = asking({"order_id": "x" * HUGE_CHARS})
    tracemalloc.start()
    try:
        [told] = completed(harness)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert harness.calls["lookup_order"] == 0
    assert told.startswith("invalid arguments"), told[:200]
    assert peak < HUGE_CHARS // 2, f"peak {peak} bytes"


def assert_parsed_safely(text: str) -> dict[str, Any]:
    """``parse_arguments`` gives an object the journal can store, whatever the text."""
    arguments = parse_arguments(text)
    assert isinstance(arguments, dict)
    assert storable(arguments)
    return arguments


@given(text=json_texts)
def test_parsed_arguments_are_always_an_object_the_journal_can_hold(text: str) -> None:
    """``parse_arguments`` never raises on any text, and its object is storable."""
    assert_parsed_safely(text)


@pytest.mark.parametrize(
    "text",
    [deep_text(), huge_text(), DUPLICATE_KEYS, NAN_TEXT, SURROGATE_TEXT, NUL_TEXT],
    ids=TEXT_IDS,
)
def test_hostile_argument_texts_are_refused_by_name(text: str) -> None:
    """Deep, huge, duplicate-key, NaN, surrogate and NUL texts are refused with the reason."""
    arguments = assert_parsed_safely(text)
    assert set(arguments) == {REFUSED_ARGUMENTS_KEY}, str(arguments)[:200]
