"""JSON encoding of step inputs and outputs: canonical, hashable, never pickle.

Every step encodes its input (for its hash) and its output (to journal it, and to read it
back as the journal will), so the encoder and decoder are made once, here: ``json.dumps``
and ``json.loads`` build or look up theirs at every call, which costs a step more than the
encoding does. The text is the same as ``json.dumps(value, sort_keys=True,
separators=(",", ":"), ensure_ascii=False, allow_nan=False)`` gives.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from agent_runtime.exceptions import NotSerializable

JSONValue = Any
"""A value made of dict (str keys), list, str, int, float, bool and None."""

_READ_BACK_UNCHANGED = frozenset({type(None), bool, int, str})
"""Exact types that JSON gives back equal and of the same type (not float: NaN is refused)."""


def _encoder() -> Callable[[JSONValue], str]:
    """The canonical encoder: CPython's C encoder made once, without the table of the
    containers being encoded (which one encoder shared by threads could not keep), so a
    value that holds itself fails as one nested too deeply does, with ``RecursionError``."""
    options = json.JSONEncoder(
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        chunks = make(  # type: ignore[misc]
            None,  # no circular-reference table
            options.default,
            json.encoder.encode_basestring,
            None,  # no indent
            options.key_separator,
            options.item_separator,
            options.sort_keys,
            options.skipkeys,
            options.allow_nan,
        )

        def encode(value: JSONValue) -> str:
            return "".join(chunks(value, 0))

        if encode(_PROBE) == options.encode(_PROBE):
            return encode
    except TypeError:  # no C accelerator, or one that is called otherwise
        pass
    return options.encode


_PROBE = {"b": [1, 2.5, None, True], "a": 'é\u2028"', "c": {"z": -0.0, "y": 10**20}}
"""A value the encoder made once must write as ``json.JSONEncoder`` does, or is not used."""


_ENCODE = _encoder()
_DECODE = json.JSONDecoder().raw_decode


def canonical_json(value: JSONValue, *, what: str = "value") -> str:
    """Return the canonical JSON text of ``value`` or raise NotSerializable naming ``what``.

    Text holding a NUL character is refused on every store: PostgreSQL's ``jsonb`` cannot
    hold one, so a journal that took it on SQLite would fail in production."""
    try:
        text = _ENCODE(value)
    except (TypeError, ValueError) as exc:
        raise NotSerializable(what, str(exc)) from exc
    except RecursionError:
        raise NotSerializable(what, "nested too deeply, or holding itself") from None
    if _ESCAPED_NUL in text and holds_nul(value):  # the text alone could be "\\u0000"
        raise NotSerializable(what, f"it holds {NUL_PROBLEM}")
    return text


NUL_PROBLEM = "a NUL character (\\u0000), which PostgreSQL cannot store"
_ESCAPED_NUL = "\\u0000"


def holds_nul(value: JSONValue) -> bool:
    """Whether a string in ``value`` (a key or a value, at any depth) holds a NUL character."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def round_trip(value: JSONValue, *, what: str = "value") -> JSONValue:
    """Return ``value`` as it reads back from the journal (tuples become lists, and so on)."""
    if type(value) in _READ_BACK_UNCHANGED:
        return value
    return _DECODE(canonical_json(value, what=what))[0]


def input_hash(value: JSONValue) -> str:
    """Return a short, stable SHA-256 digest of a step's input."""
    text = canonical_json(value, what="step input")
    return hashlib.sha256(text.encode()).hexdigest()[:16]
