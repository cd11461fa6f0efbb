"""Writing many rows in one PostgreSQL statement: the rows as one JSON document.

``executemany`` sends a statement once per row, and arrays of values (one per column) are
encoded value by value by the driver: either way the client's work grows with the rows and
their columns. Here a batch's rows go as one JSON array (``json.dumps``, in C), which the
statement reads as a table (``jsonb_to_recordset``) typed by the columns' own types: one
statement, one parameter, whatever the batch's size.

A row gives each column its value as the store holds it: JSON values as they are (an SQL
NULL for None), timestamps as timezone-aware datetimes, UUIDs as their hex strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Column, Dialect, Table


class JsonRows:
    """A statement over the rows of ``recordset(columns)``: ``sql`` and its ``params``."""

    def __init__(self, sql: str, columns: Sequence[Column[Any]]) -> None:
        self.sql = sql
        self.names = tuple(column.name for column in columns)

    def params(self, rows: Sequence[Mapping[str, Any]], **values: Any) -> dict[str, Any]:
        """The driver parameters: ``rows`` (their columns' values only) as one JSON
        document, and ``values`` as they are, for the statement's other parameters."""
        names = self.names
        document = [{name: row[name] for name in names} for row in rows]
        return {"rows": json.dumps(document, default=_timestamp), "count": len(rows)} | values


def recordset(columns: Sequence[Column[Any]], dialect: Dialect, alias: str = "v") -> str:
    """A row per element of the JSON array ``rows``, each column typed as the table's
    (without a length: a cast to ``VARCHAR(n)`` would cut a longer value where an insert
    refuses it), as the table ``alias``.

    PostgreSQL takes any ``jsonb_to_recordset`` for 100 rows, and joining 100 rows to a
    table of a few thousand is cheaper read whole than through an index: each batch would
    read all the approvals or runs to update eight. So the rows come through ``LIMIT
    %(count)s`` (their number, which cuts none): the planner then counts a batch's rows
    (or a tenth of 100 for a plan made for any parameters) and finds them by key."""
    typed = ", ".join(f"{c.name} {_base_type(c, dialect)}" for c in columns)
    rows = f"jsonb_to_recordset(%(rows)s::jsonb) AS r({typed})"
    return f"(SELECT * FROM {rows} LIMIT %(count)s) AS {alias}"


def insert_rows(table: Table, names: Sequence[str], dialect: Dialect, then: str = "") -> JsonRows:
    """INSERT the rows' ``names`` columns into ``table``, followed by ``then`` (``ON
    CONFLICT …``, ``RETURNING …``)."""
    columns = [table.c[name] for name in names]
    sql = (
        f"INSERT INTO {table.name} ({', '.join(names)}) "
        f"SELECT {', '.join(f'v.{n}' for n in names)} FROM {recordset(columns, dialect)} {then}"
    )
    return JsonRows(sql.strip(), columns)


def update_rows(table: Table, key: str, names: Sequence[str], dialect: Dialect) -> JsonRows:
    """UPDATE ``table``'s row whose ``key`` is each row's, setting its ``names`` columns.

    A row must be given once: PostgreSQL updates a row from one of several matching rows."""
    columns = [table.c[key], *(table.c[name] for name in names)]
    assignments = ", ".join(f"{name} = v.{name}" for name in names)
    sql = (
        f"UPDATE {table.name} SET {assignments} FROM {recordset(columns, dialect)} "
        f"WHERE {table.name}.{key} = v.{key}"
    )
    return JsonRows(sql, columns)


def _base_type(column: Column[Any], dialect: Dialect) -> str:
    return re.sub(r"\(\d+\)$", "", column.type.compile(dialect))


def _timestamp(value: Any) -> str:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.isoformat()
    raise TypeError(f"not a JSON value nor an aware timestamp: {type(value).__name__}")
