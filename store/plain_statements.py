"""Hot statements whose parameters are encoded by their columns' types, without
SQLAlchemy's type processing.

SQLAlchemy encodes a parameter through its type's bind processor (a ``TypeDecorator``'s
own step, then its implementation's), which for a journal entry's ten columns costs more
client time than SQLite takes to write the row. ``plain_params`` encodes each parameter
with one function chosen by its column's type, to the very value SQLAlchemy would send:

========================  ===============================  ===============================
type                      SQLite                           PostgreSQL (libpq text)
========================  ===============================  ===============================
``JsonDocument``          canonical JSON text              canonical JSON text
``UTCDateTime``           ``YYYY-MM-DD HH:MM:SS.ffffff``   ISO 8601 with its offset
                          in UTC, without zone
``HexUuid``               32 hex digits                    32 hex digits
``Integer``, ``String``   the value                        its text
========================  ===============================  ===============================

A Python None is SQL NULL in every column (a JSON document's too, as ``JsonDocument``
stores it). A statement binding any other type is refused when it is built
(``TypeError``). ``tests/integration/test_plain_statements.py`` checks, column by column,
that what is stored is what SQLAlchemy stores. ``PlainPrepared`` runs such a statement on
a driver connection's cursor (SQLite's journal append and run end);
``store.libpq_statements`` sends one through libpq (PostgreSQL's).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, Dialect, Integer, String
from sqlalchemy.engine import Compiled
from sqlalchemy.sql import ClauseElement
from sqlalchemy.types import TypeEngine

from agent_runtime.serialization import canonical_json
from store.driver import BoundParams, Channel, Outcome, Statement
from store.types import HexUuid, JsonDocument, UTCDateTime

Encoder = Callable[[Any], Any]

_HEX32 = re.compile(r"[0-9a-f]{32}")


class PlainPrepared:
    """A statement compiled once for a dialect with positional placeholders (SQLite's),
    its parameters encoded plainly, run on a driver connection's cursor; it returns no
    rows."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        order: Sequence[str] | None = getattr(compiled, "positiontup", None)
        if order is None:
            raise ValueError(f"{dialect.name}'s placeholders are named: use Prepared")
        self.sql = compiled.string
        self._params = plain_params(compiled, dialect, order)

    def params(self, values: Mapping[str, Any]) -> list[Any] | dict[str, Any]:
        """The parameters for ``values``, by bind name."""
        return self._params(values)

    def run(self, channel: Channel, params: list[Any], fetch: bool) -> Outcome:
        """Execute on ``channel``'s cursor; return how many rows it changed."""
        if fetch:
            raise ValueError("a plain statement returns no rows")
        cursor = channel.cursor
        cursor.execute(self.sql, params)
        return Outcome([], int(cursor.rowcount))


def plain_statement(statement: ClauseElement, dialect: Dialect, name: str) -> Statement:
    """``statement`` with plainly encoded parameters: on PostgreSQL prepared as ``name`` on
    each driver connection and sent through libpq's own call, elsewhere on the cursor."""
    if dialect.name == "postgresql":
        return libpq_statement(statement, dialect, name)
    return PlainPrepared(statement, dialect)


def libpq_statement(
    statement: ClauseElement, dialect: Dialect, name: str, returns: Iterable[Column[Any]] = ()
) -> Statement:
    """``statement`` prepared as ``name`` on each PostgreSQL driver connection, returning the
    rows of ``returns`` (``store.libpq_statements``; psycopg is imported by PostgreSQL's
    processes only)."""
    from store.libpq_statements import LibpqPrepared

    return LibpqPrepared(statement, dialect, name, returns)


def plain_params(compiled: Compiled, dialect: Dialect, order: Sequence[str]) -> BoundParams:
    """The parameters of ``compiled`` in ``order``, each encoded plainly by its type."""
    return BoundParams(compiled, lambda kind: plain_encoder(kind, dialect), order)


def plain_encoder(kind: TypeEngine[Any], dialect: Dialect) -> Encoder | None:
    """How a value bound to a column of type ``kind`` is sent on ``dialect`` (see the
    table above; None: as it is); ``TypeError`` for a type without one."""
    text = dialect.name == "postgresql"
    if isinstance(kind, JsonDocument):
        return _json
    if isinstance(kind, UTCDateTime):
        return _offset_timestamp if text else _sqlite_timestamp
    if isinstance(kind, HexUuid):
        return _hex_uuid
    if isinstance(kind, Integer | String):  # String covers Text and VARCHAR
        return _text if text else None
    raise TypeError(f"no plain encoding for a parameter of type {kind!r}")


def _json(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def _offset_timestamp(value: datetime | None) -> str | None:
    return None if value is None else _utc_text(value) + "+00:00"


def _sqlite_timestamp(value: datetime | None) -> str | None:
    return None if value is None else _utc_text(value)


def _utc_text(value: datetime) -> str:
    """``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC (``isoformat`` takes half as long again)."""
    utc = value if value.tzinfo is UTC else value.astimezone(UTC)
    return "%04d-%02d-%02d %02d:%02d:%02d.%06d" % (  # noqa: UP031 (a third faster than f"")
        utc.year,
        utc.month,
        utc.day,
        utc.hour,
        utc.minute,
        utc.second,
        utc.microsecond,
    )


def _hex_uuid(value: str | None) -> str | None:
    if value is None or _HEX32.fullmatch(value):
        return value
    return uuid.UUID(hex=value).hex  # another spelling of a UUID, as HexUuid reads it


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
