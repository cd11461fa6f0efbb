"""SQLAlchemy's dialect packages, each imported when a database of its kind first needs it.

Signoff writes a few statements in a database's own SQL (``INSERT … ON CONFLICT``, ``jsonb``).
Naming the dialect's package at import time would load SQLAlchemy's PostgreSQL dialect into
every process, one on SQLite included, where it costs as much start-up time as the rest of a
short command; here the dialect is the connection's, found by its name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, Generic, TypeVar

from sqlalchemy import Table

Built = TypeVar("Built")


def dialect(name: str) -> ModuleType:
    """The dialect package ``name`` (``"postgresql"``, ``"sqlite"``): a connection of that
    kind has imported it already."""
    return importlib.import_module(f"sqlalchemy.dialects.{name}")


def insert(table: Table, name: str) -> Any:
    """An INSERT into ``table`` in dialect ``name``'s SQL, with its ``on_conflict_do_*``."""
    return dialect(name).insert(table)


class PerDialect(Generic[Built]):
    """A statement (or any value) built once for each dialect, when a connection of that
    dialect first asks for it: ``QUEUE[conn.dialect.name]``."""

    def __init__(self, build: Callable[[str], Built]) -> None:
        self._build = build
        self._built: dict[str, Built] = {}

    def __getitem__(self, name: str) -> Built:
        """The value for dialect ``name``, built on first use (two threads building it at
        once build equal values, and either is kept)."""
        found = self._built.get(name)
        if found is None:
            found = self._built.setdefault(name, self._build(name))
        return found
