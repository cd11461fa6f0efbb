"""JSON Schema for a tool's arguments, derived from its signature and docstring."""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

RUNTIME_PARAMETERS = frozenset({"idempotency_key"})
"""Parameters the runtime fills in itself; they are not part of the model-facing schema."""

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
}


def describe(fn: Callable[..., Any]) -> tuple[str, dict[str, Any]]:
    """Return the tool description and the JSON Schema of ``fn``'s arguments."""
    summary, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
    hints = get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        if name in RUNTIME_PARAMETERS:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__}: *args and **kwargs cannot be described")
        if name not in hints:
            raise TypeError(f"tool {fn.__name__}: parameter {name!r} needs a type hint")
        prop = type_schema(hints[name])
        if name in param_docs:
            prop = {**prop, "description": param_docs[name]}
        if param.default is param.empty:
            required.append(name)
        else:
            prop = {**prop, "default": param.default}
        properties[name] = prop
    schema = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return summary, schema


def type_schema(hint: Any) -> dict[str, Any]:
    """Return the JSON Schema of one Python type hint (JSON-compatible types only)."""
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        return {"anyOf": [type_schema(a) for a in args]}
    if origin is tuple and args and args[-1] is not Ellipsis:
        return {
            "type": "array",
            "prefixItems": [type_schema(a) for a in args],
            "items": False,
            "minItems": len(args),
        }
    if origin in (list, tuple) or hint in (list, tuple):
        return {"type": "array", **({"items": type_schema(args[0])} if args else {})}
    if origin is dict or hint is dict:
        if args and args[0] is not str:
            raise TypeError(f"JSON objects have string keys, not {args[0]!r}")
        extra = {"additionalProperties": type_schema(args[1])} if args else {}
        return {"type": "object", **extra}
    if hint is Any:
        return {}
    raise TypeError(f"type {hint!r} has no JSON Schema; use str, int, float, bool, list, dict")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and its ``Args:`` descriptions."""
    head, _, rest = doc.partition("\nArgs:\n")
    params: dict[str, str] = {}
    current = None
    for line in rest.splitlines():
        match = re.match(r"^\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if match:
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif current and line.startswith(" " * 6) and line.strip():
            params[current] += " " + line.strip()
        elif line.strip() and not line.startswith(" "):
            break
    return " ".join(head.split()), params
