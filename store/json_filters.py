"""Conditions on JSON columns that read the same on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, exists, func, literal, select


def text_is(column: Any, path: str, value: str, dialect: str) -> ColumnElement[bool]:
    """Whether a JSON column holds the string ``value`` at the dotted ``path``."""
    keys = path.split(".")
    if dialect == "postgresql":
        found = column[tuple(keys)]
        return and_(func.jsonb_typeof(found) == "string", found.as_string() == value)
    where = "$" + "".join(f'."{key}"' for key in keys)
    return and_(func.json_type(column, where) == "text", func.json_extract(column, where) == value)


def array_has(column: Any, key: str, value: str, dialect: str) -> ColumnElement[bool]:
    """Whether the array at ``key`` of a JSON column holds the string ``value``."""
    if dialect == "postgresql":
        return column[key].op("@>")(func.jsonb_build_array(value))  # type: ignore[no-any-return]
    items = func.json_each(column, f"$.{key}").table_valued("value")
    return exists(select(literal(1)).select_from(items).where(items.c.value == value))
