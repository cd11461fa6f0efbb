"""Conditions on JSON columns that read the same on SQLite and PostgreSQL.

Keys and dotted paths into a JSON column are written into the SQL as literals, not bound as
parameters, so that the database can match a condition to an index on the same expression
(``store.models`` indexes those the lists filter on). They are names from the code, checked
to be letters, digits and underscores.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import NullType, Text

from store.types import JSONValue

_KEY = re.compile(r"[A-Za-z0-9_]+")


class ValueAt(ColumnElement[Any]):
    """The value at a dotted path of a JSON column (NULL where there is none), as each
    database writes it: ``jsonb`` on PostgreSQL, an SQL value (text for a string) on SQLite.

    An index on it and a condition on it are written alike, so the condition uses the index.
    """

    inherit_cache = True
    _traverse_internals = [  # noqa: RUF012 (SQLAlchemy reads it from the class)
        ("column", InternalTraversal.dp_clauseelement),
        ("path", InternalTraversal.dp_string),
    ]

    def __init__(self, column: Any, path: str) -> None:
        self.column = column
        self.path = ".".join(map(_key, path.split(".")))
        self.type = NullType()


@compiles(ValueAt, "postgresql")
def _value_at_postgresql(element: ValueAt, compiler: SQLCompiler, **kw: Any) -> str:
    keys = element.path.replace(".", ",")
    return f"({compiler.process(element.column, **kw)} #> '{{{keys}}}')"


@compiles(ValueAt, "sqlite")
def _value_at_sqlite(element: ValueAt, compiler: SQLCompiler, **kw: Any) -> str:
    return f"json_extract({compiler.process(element.column, **kw)}, '$.{element.path}')"


def text_is(column: Any, path: str, value: str, dialect: str) -> ColumnElement[bool]:
    """Whether a JSON column holds the string ``value`` at the dotted ``path``."""
    found = ValueAt(column, path)
    if dialect == "postgresql":  # jsonb equality: a string, and that one
        return found == bindparam(None, value, type_=JSONValue)
    kind = func.json_type(column, _sqlite_path(path))
    return and_(kind == "text", found == bindparam(None, value, type_=Text))


def in_workspace(column: Any, workspace: str, dialect: str) -> ColumnElement[bool]:
    """Whether the person (an ``Actor``'s JSON) in ``column`` is of ``workspace`` (their
    Grid organization, else their team), or of no workspace at all."""

    def unset(key: str) -> ColumnElement[bool]:
        return or_(ValueAt(column, key).is_(None), text_is(column, key, "", dialect))

    return or_(
        text_is(column, "enterprise_id", workspace, dialect),
        and_(
            unset("enterprise_id"),
            or_(text_is(column, "team_id", workspace, dialect), unset("team_id")),
        ),
    )


def item_at(column: Any, key: str) -> ColumnElement[Any]:
    """The value at ``key`` of the PostgreSQL ``jsonb`` ``column``."""
    return column.op("->")(literal_column(f"'{_key(key)}'"))  # type: ignore[no-any-return]


def array_has(column: Any, key: str, value: str, dialect: str) -> ColumnElement[bool]:
    """Whether the array at ``key`` of a JSON column holds the string ``value``."""
    if dialect == "postgresql":
        return item_at(column, key).op("@>")(func.jsonb_build_array(value))
    items = func.json_each(column, _sqlite_path(key)).table_valued("value")
    return exists(select(literal(1)).select_from(items).where(items.c.value == value))


def _key(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise ValueError(f"a JSON key is letters, digits and underscores: {key!r}")
    return key


def _sqlite_path(path: str) -> ColumnElement[Any]:
    return literal_column("'$." + ".".join(map(_key, path.split("."))) + "'")
