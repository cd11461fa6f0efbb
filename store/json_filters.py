"""Conditions on JSON columns that read the same on SQLite and PostgreSQL.

A dotted path into a JSON column is written into the SQL as a literal, not bound as a
parameter, so that the database can match a filter to an index on the same expression
(``store.models`` indexes the input paths the lists of runs filter on).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, literal, literal_column, select

_KEY = re.compile(r"[A-Za-z0-9_]+")


def string_at(column: Any, path: str, dialect: str) -> ColumnElement[Any]:
    """The text at the dotted ``path`` of the JSON ``column`` (NULL where there is none)."""
    if dialect == "postgresql":
        return column.op("#>>")(literal_column(_pg_path(path)))  # type: ignore[no-any-return]
    return func.json_extract(column, literal_column(_sqlite_path(path)))


def text_is(column: Any, path: str, value: str, dialect: str) -> ColumnElement[bool]:
    """Whether a JSON column holds the string ``value`` at the dotted ``path``."""
    if dialect == "postgresql":
        kind = func.jsonb_typeof(column.op("#>")(literal_column(_pg_path(path))))
        return and_(kind == "string", string_at(column, path, dialect) == value)
    kind = func.json_type(column, literal_column(_sqlite_path(path)))
    return and_(kind == "text", string_at(column, path, dialect) == value)


def array_has(column: Any, key: str, value: str, dialect: str) -> ColumnElement[bool]:
    """Whether the array at ``key`` of a JSON column holds the string ``value``."""
    if dialect == "postgresql":
        return column[key].op("@>")(func.jsonb_build_array(value))  # type: ignore[no-any-return]
    items = func.json_each(column, f"$.{key}").table_valued("value")
    return exists(select(literal(1)).select_from(items).where(items.c.value == value))


def _keys(path: str) -> list[str]:
    keys = path.split(".")
    if not all(_KEY.fullmatch(key) for key in keys):
        raise ValueError(f"a JSON path is dotted letters, digits and underscores: {path!r}")
    return keys


def _pg_path(path: str) -> str:
    return "'{" + ",".join(_keys(path)) + "}'"


def _sqlite_path(path: str) -> str:
    return "'$." + ".".join(_keys(path)) + "'"
