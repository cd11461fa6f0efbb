"""Checks of what an agent's author writes: the types of a policy's, a budget's and an
agent's fields, so a wrong one is refused where it is written, at import, rather than
meeting the first run (or, worse, read otherwise: ``approvers="U_DANA"`` would be the
approvers ``U``, ``_``, ``D``, ``A`` and ``N``).

Each returns the value as the definition keeps it (a list of names becomes a tuple) or
raises ``TypeError`` (a value of the wrong type) or ``ValueError`` (one out of range)
naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import timedelta


def names(value: object, field: str) -> tuple[str, ...]:
    """``value`` as a tuple of non-empty strings (any iterable of them; not one string)."""
    if isinstance(value, str | bytes):
        raise TypeError(f"{field} takes several names, not one string: write {field}=({value!r},)")
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise TypeError(f"{field} must be a tuple of strings, not {type(value).__name__}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise TypeError(f"{field} must hold non-empty strings, not {item!r}")
    return items


def groups(value: object, field: str) -> dict[str, tuple[str, ...]]:
    """``value`` as a mapping of group names to their members' names."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must map group names to members, not {type(value).__name__}")
    found: dict[str, tuple[str, ...]] = {}
    for name, members in value.items():
        if not isinstance(name, str) or not name.strip():
            raise TypeError(f"{field} must be keyed by group names, not {name!r}")
        found[name] = names(members, f"{field}[{name!r}]")
    return found


def count(value: object, field: str, *, least: int) -> int:
    """``value`` as a whole number of at least ``least`` (not a bool, not a string)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{field} must be a whole number, not {value!r}")
    if value < least:
        raise ValueError(f"{field} must be at least {least}, not {value}")
    return value


def optional_count(value: object, field: str, *, least: int) -> int | None:
    """None, or ``count``."""
    return None if value is None else count(value, field, least=least)


def optional_amount(value: object, field: str) -> float | None:
    """None, or a finite number of at least zero (not a bool, not a string)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{field} must be a number, not {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field} must be a finite number of at least 0, not {value}")
    return value


def duration(value: object, field: str) -> timedelta:
    """``value``, a positive ``timedelta``."""
    if not isinstance(value, timedelta):
        raise TypeError(
            f"{field} must be a datetime.timedelta (e.g. timedelta(hours=1)), not {value!r}"
        )
    if value <= timedelta(0):
        raise ValueError(f"{field} must be positive, not {value}")
    return value


def optional_duration(value: object, field: str) -> timedelta | None:
    """None, or ``duration``."""
    return None if value is None else duration(value, field)


def flag(value: object, field: str) -> bool:
    """``value``, a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{field} must be True or False, not {value!r}")
    return value
