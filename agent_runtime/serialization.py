"""JSON encoding of step inputs and outputs: canonical, hashable, never pickle."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agent_runtime.exceptions import NotSerializable

JSONValue = Any
"""A value made of dict (str keys), list, str, int, float, bool and None."""

_READ_BACK_UNCHANGED = frozenset({type(None), bool, int, str})
"""Exact types that JSON gives back equal and of the same type (not float: NaN is refused)."""


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
"""Made once: ``json.dumps`` with these options builds an encoder at every call, and a
step encodes several values."""


def canonical_json(value: JSONValue, *, what: str = "value") -> str:
    """Return the canonical JSON text of ``value`` or raise NotSerializable naming ``what``."""
    try:
        return _CANONICAL.encode(value)
    except (TypeError, ValueError) as exc:
        raise NotSerializable(what, str(exc)) from exc


def round_trip(value: JSONValue, *, what: str = "value") -> JSONValue:
    """Return ``value`` as it reads back from the journal (tuples become lists, and so on)."""
    if type(value) in _READ_BACK_UNCHANGED:
        return value
    return json.loads(canonical_json(value, what=what))


def input_hash(value: JSONValue) -> str:
    """Return a short, stable SHA-256 digest of a step's input."""
    text = canonical_json(value, what="step input")
    return hashlib.sha256(text.encode()).hexdigest()[:16]
