"""Limits on JSON from outside: what the journal, the database or Slack could not hold is
refused, with the reason, before it is stored.

A value Python's ``json`` accepts may still be unusable: NaN and Infinity are not JSON (the
journal refuses them), a lone surrogate is not UTF-8 (no database stores it), nor does
PostgreSQL's ``jsonb`` store a NUL character, duplicate keys say two things at once (a
person would approve one, a tool would get the other), 10,000 levels of nesting exhaust
every recursive encoder, and ten megabytes fill the journal.
``json_problem`` names what is wrong with a parsed value, without recursion and without
copying it; ``strict_loads`` parses a text and raises ``UnsafeJson`` instead of returning
such a value.
"""

from __future__ import annotations

import json
import math
from typing import Any

from agent_runtime.exceptions import UnsafeJson
from agent_runtime.serialization import NUL_PROBLEM

MAX_DEPTH = 64
"""Nesting levels of arrays and objects: far above any tool's arguments or Slack payload."""
MAX_CHARS = 256 * 1024
"""Characters of text (keys and strings) in one value: tool arguments, edits, CLI input."""
MAX_INT = 2**63 - 1
"""The largest integer magnitude every store and Slack keep exactly."""
REFUSED_ARGUMENTS_KEY = "_refused"
"""The one key of tool arguments that were refused before they were journaled: why."""


def json_problem(
    value: Any, *, max_depth: int = MAX_DEPTH, max_chars: int = MAX_CHARS
) -> str | None:
    """Return what makes ``value`` unusable as JSON from outside, or None if nothing does."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop = stack.pop
    chars = 0
    while stack:
        item, depth = pop()
        if type(item) is str:  # most of a document, so first and inline (same as below)
            chars += len(item)
            if chars > max_chars or not item.isascii() or "\x00" in item:
                problem = _text_problem(item, chars, max_chars)
                if problem is not None:
                    return problem
            continue
        if isinstance(item, dict | list | tuple) and depth > max_depth:
            return f"nesting deeper than {max_depth} levels"
        if isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    return "a key that is not a string"
                stack.append((key, depth))
                stack.append((inner, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, str):
            chars += len(item)
            problem = _text_problem(item, chars, max_chars)
            if problem is not None:
                return problem
        else:
            problem = _scalar_problem(item)
            if problem is not None:
                return problem
    return None


def _text_problem(text: str, chars: int, max_chars: int) -> str | None:
    if chars > max_chars:
        return f"over {max_chars} characters of text"
    if "\x00" in text:
        return NUL_PROBLEM
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "text that is not UTF-8 (a lone surrogate)"
    return None


def _scalar_problem(item: Any) -> str | None:
    if item is None or isinstance(item, bool):
        return None
    if isinstance(item, int):
        return None if -MAX_INT <= item <= MAX_INT else "an integer beyond 64 bits"
    if isinstance(item, float):
        return None if math.isfinite(item) else "NaN or Infinity, which are not JSON"
    return f"a {type(item).__name__}, which is not JSON"


def strict_loads(text: str, *, max_depth: int = MAX_DEPTH, max_chars: int = MAX_CHARS) -> Any:
    """Parse ``text``; raise ``UnsafeJson`` for what ``json_problem`` names or duplicate keys,
    and ``ValueError`` (``json.JSONDecodeError``) for text that is not JSON."""
    if len(text) > max_chars:
        raise UnsafeJson(f"over {max_chars} characters of text")
    try:
        value = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise UnsafeJson(f"nesting deeper than {max_depth} levels") from None
    problem = json_problem(value, max_depth=max_depth, max_chars=max_chars)
    if problem is not None:
        raise UnsafeJson(problem)
    return value


def _no_constant(name: str) -> Any:
    raise UnsafeJson("NaN or Infinity, which are not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise UnsafeJson(f"the key {key[:40]!r} twice")
        found[key] = value
    return found


def refused_arguments(problem: str) -> dict[str, Any]:
    """Tool arguments that stand for refused ones: the model is told ``problem``."""
    return {REFUSED_ARGUMENTS_KEY: problem}


def refusal_of(arguments: dict[str, Any]) -> str | None:
    """Why the arguments were refused, if they stand for refused ones."""
    problem = arguments.get(REFUSED_ARGUMENTS_KEY)
    return str(problem) if len(arguments) == 1 and problem is not None else None


__all__ = [
    "MAX_CHARS",
    "MAX_DEPTH",
    "REFUSED_ARGUMENTS_KEY",
    "json_problem",
    "refusal_of",
    "refused_arguments",
    "strict_loads",
]
