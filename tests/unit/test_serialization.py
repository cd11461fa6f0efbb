"""The canonical JSON of step inputs and outputs: the text ``json.dumps`` writes with the
journal's options, from one encoder shared by every thread."""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from agent_runtime.exceptions import NotSerializable
from agent_runtime.serialization import canonical_json, holds_nul, input_hash, round_trip

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


def _dumps(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@given(JSON_VALUES)
def test_the_text_is_what_json_dumps_writes_and_reads_back_as_json_loads_does(value: Any) -> None:
    """Any JSON value without a NUL character is written exactly as ``json.dumps`` with the
    journal's options writes it, and read back as ``json.loads`` reads that text."""
    assume(not holds_nul(value))
    assert canonical_json(value) == _dumps(value)
    assert round_trip(value) == json.loads(_dumps(value))


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), {1, 2}, object(), {"when": threading.Event()}],
    ids=["nan", "infinity", "set", "object", "nested object"],
)
def test_what_json_cannot_hold_is_refused_as_not_serializable(value: Any) -> None:
    """NaN, Infinity and values that are not JSON are refused with ``NotSerializable``."""
    with pytest.raises(NotSerializable):
        canonical_json(value, what="the output")


def test_a_value_that_holds_itself_is_refused_as_not_serializable() -> None:
    """A list that contains itself is refused (not a crash, not an endless loop)."""
    looped: list[Any] = [1]
    looped.append(looped)
    with pytest.raises(NotSerializable, match="holding itself"):
        canonical_json(looped)


def test_a_refused_value_leaves_the_shared_encoder_as_it_was() -> None:
    """After a refusal half-way through a value, the next values encode as before: the
    encoder keeps nothing of a value between calls."""
    shared = {"a": [1, 2]}
    with pytest.raises(NotSerializable):
        canonical_json({"a": shared, "b": [shared, object()]})
    assert canonical_json({"x": shared, "y": shared}) == '{"x":{"a":[1,2]},"y":{"a":[1,2]}}'


def test_threads_encoding_at_once_each_get_their_own_text() -> None:
    """Eight threads encoding different values at once (some refused) each get the text of
    their own values."""
    wrong: list[str] = []
    barrier = threading.Barrier(8)

    def encode(index: int) -> None:
        barrier.wait()
        for round_ in range(2_000):
            shared = [index, round_]
            value = {"thread": index, "round": round_, "twice": [shared, shared]}
            if round_ % 7 == 0:
                with contextlib.suppress(NotSerializable):
                    canonical_json([shared, object()])
            if canonical_json(value) != _dumps(value):
                wrong.append(f"thread {index}, round {round_}")

    threads = [threading.Thread(target=encode, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_input_hashes_of_journals_already_written_are_unchanged() -> None:
    """The digest of a step's input is the one journals written before hold."""
    assert input_hash([3, "bench"]) == "78a1f8296d9e3bad"


@pytest.mark.parametrize(
    "value", ["a\x00b", {"k\x00": 1}, [[{"deep": ["\x00"]}]]], ids=["text", "key", "nested"]
)
def test_a_nul_character_is_refused_on_every_store(value: Any) -> None:
    """PostgreSQL's ``jsonb`` cannot hold a NUL character: refused here, on SQLite too, so a
    journal that works in tests works in production."""
    with pytest.raises(NotSerializable, match="NUL"):
        canonical_json(value, what="the output")


def test_the_text_of_a_backslash_u_is_not_taken_for_a_nul() -> None:
    """The six characters ``\\u0000`` are text like any other (their JSON escapes the
    backslash)."""
    assert json.loads(canonical_json(["\\u0000"])) == ["\\u0000"]
