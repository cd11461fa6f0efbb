"""Hostile input for the property tests: JSON values and texts no honest sender produces.

``json_values`` mixes ordinary JSON with NaN and infinities, lone surrogates (text that is
not UTF-8) and odd keys; ``json_texts`` adds texts that are not even that: duplicate keys,
nesting thousands of levels deep, truncated documents. ``HUGE`` and ``DEEP`` are the extremes
every surface is also tried with explicitly (``hypothesis.example``): a 10 MB string and
10,000 levels of nesting.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

HUGE_CHARS = 10 * 1024 * 1024
DEEP_LEVELS = 10_000

any_char = st.characters(codec=None, exclude_categories=())
"""Every code point, lone surrogates included."""
texts = st.text(any_char, max_size=40)

leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts
)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


def deep_list(levels: int = DEEP_LEVELS) -> Any:
    """A list nested ``levels`` deep, built without recursion."""
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def deep_text(levels: int = DEEP_LEVELS) -> str:
    """JSON text of an object nesting ``levels`` arrays."""
    return '{"a": ' + "[" * levels + "]" * levels + "}"


def huge_text(chars: int = HUGE_CHARS) -> str:
    """JSON text of an object holding one ``chars``-long string."""
    return '{"a": "' + "x" * chars + '"}'


DUPLICATE_KEYS = '{"order_id": "1042", "order_id": "9999"}'
NAN_TEXT = '{"amount_cents": NaN}'
SURROGATE_TEXT = '{"order_id": "\\ud800"}'
NUL_TEXT = '{"order_id": "10\\u000042"}'
HOSTILE_TEXTS = (
    DUPLICATE_KEYS,
    NAN_TEXT,
    SURROGATE_TEXT,
    deep_text(),
    '{"a": Infinity}',
    NUL_TEXT,
)
HOSTILE_IDS = (
    "duplicate keys",
    "NaN",
    "a lone surrogate",
    "10,000 levels deep",
    "Infinity",
    "a NUL character",
)


def _dumped(value: Any) -> str:
    return json.dumps({"a": value}, ensure_ascii=False)


json_texts = st.one_of(
    json_values.map(_dumped),
    st.sampled_from(HOSTILE_TEXTS),
    st.integers(min_value=1, max_value=2 * DEEP_LEVELS).map(deep_text),
    texts,
    json_values.map(_dumped).map(lambda t: t[: len(t) // 2]),
)
"""JSON texts, valid or not, with everything above in them."""
