"""``json_limits``: JSON from outside is parsed within limits or refused with the reason."""

from __future__ import annotations

import json
import sys
import tracemalloc
from typing import Any

import pytest
from hypothesis import given

from agent_runtime.exceptions import UnsafeJson
from agent_runtime.json_limits import MAX_DEPTH, json_problem, strict_loads
from agent_runtime.serialization import canonical_json
from tests.hostile import HOSTILE_IDS, HOSTILE_TEXTS, deep_list, huge_text, json_texts, json_values


def storable(value: Any) -> None:
    """Fail unless the journal can hold ``value`` (canonical JSON, encoded as UTF-8)."""
    canonical_json(value).encode()


@given(text=json_texts)
def test_any_text_is_parsed_into_a_storable_value_or_refused(text: str) -> None:
    """``strict_loads`` returns a value the journal can hold, or raises ``UnsafeJson`` or
    ``ValueError`` (not JSON): never anything else."""
    try:
        value = strict_loads(text)
    except (UnsafeJson, json.JSONDecodeError):
        return
    storable(value)


@given(value=json_values)
def test_a_value_without_a_problem_is_storable(value: Any) -> None:
    """Whenever ``json_problem`` finds nothing, the journal can hold the value."""
    if json_problem(value) is None:
        storable(value)


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=HOSTILE_IDS)
def test_each_hostile_text_is_refused(text: str) -> None:
    """Duplicate keys, NaN, a lone surrogate, 10,000 levels, Infinity: each refused."""
    with pytest.raises(UnsafeJson):
        strict_loads(text)


def test_ten_megabytes_are_refused_before_parsing() -> None:
    """A 10 MB text is refused by its length: handling it allocates next to nothing."""
    text = huge_text()
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeJson, match="characters"):
            strict_loads(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak


def test_a_deep_value_is_judged_without_recursion() -> None:
    """10,000 levels are found too deep even with a recursion limit far below that."""
    value = deep_list()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        problem = json_problem(value)
    finally:
        sys.setrecursionlimit(limit)
    assert problem == f"nesting deeper than {MAX_DEPTH} levels"
