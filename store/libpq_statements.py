"""The journal's append on PostgreSQL through libpq's own call, without psycopg's cursor.

Every journaled step is one fenced ``INSERT``. Through a psycopg cursor the statement
costs the client about twice what libpq itself needs: the cursor adapts each parameter,
rewrites the query's placeholders, keeps its prepared-statement cache and drives the
protocol from Python generators (≈ 40 µs a statement, as much as the rest of a step;
``python -m bench.steps --only journal`` measures it). A ``LibpqPrepared`` statement is
prepared by name once on each driver connection it runs on (``PQprepare``) and then
executed with ``PQexecPrepared``, which releases the GIL while it waits; its parameters go
as text, encoded by the type of the column they are bound to: integers, strings, UTC
timestamps, hex UUIDs and JSON documents (canonical text), the types of a journal entry.
A statement binding any other type is refused when it is built. The SQL is SQLAlchemy's,
with its placeholders numbered, so the statement is the very one ``Prepared`` runs.

Errors come out as psycopg raises them (a unique violation as ``UniqueViolation``, a
connection the server closed as ``OperationalError``, leaving the connection closed), so
``DriverConnections`` wraps and handles them as it does a cursor's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from psycopg import OperationalError, pq
from psycopg.errors import error_from_result
from sqlalchemy import Dialect, Integer, String
from sqlalchemy.sql import ClauseElement
from sqlalchemy.types import TypeEngine

from agent_runtime.serialization import canonical_json
from store.driver import Channel, Outcome
from store.types import HexUuid, JsonDocument, UTCDateTime

TextEncoder = Callable[[Any], str | None]

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")
_DONE = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
_NOT_PREPARED = b"26000"  # invalid_sql_statement_name: no prepared statement of that name


class LibpqPrepared:
    """A PostgreSQL statement prepared as ``name`` on each driver connection it runs on,
    executed by libpq with its parameters as text; it returns no rows."""

    def __init__(self, statement: ClauseElement, dialect: Dialect, name: str) -> None:
        if dialect.name != "postgresql":
            raise ValueError(f"libpq statements are PostgreSQL's, not {dialect.name}'s")
        compiled = statement.compile(dialect=dialect)
        bind_names: Mapping[Any, str] = getattr(compiled, "bind_names", {})
        self.sql, order = numbered(compiled.string)
        encoders = {name: text_encoder(bind.type) for bind, name in bind_names.items()}
        fixed = {
            name: encoders[name](bind.effective_value)
            for bind, name in bind_names.items()
            if not bind.required
        }
        self._name = name.encode()
        self._sql = self.sql.encode()
        self._order = [(name, encoders[name], fixed.get(name, _GIVEN)) for name in order]

    def params(self, values: Mapping[str, Any]) -> list[str | None]:
        """The statement's parameters as text, in placeholder order (``KeyError`` if a bind
        has no value; the literals it was built with are its own)."""
        return [
            encode(values[name]) if fixed is _GIVEN else fixed
            for name, encode, fixed in self._order
        ]

    def run(self, channel: Channel, params: list[str | None], fetch: bool) -> Outcome:
        """Execute on ``channel``'s connection (preparing the statement there first if it
        is new to it); return how many rows it changed."""
        if fetch:
            raise ValueError("a libpq statement returns no rows")
        connection = channel.connection
        pgconn = connection.pgconn
        codec = connection.info.encoding
        sent = [None if p is None else p.encode(codec) for p in params]
        if self._name in channel.prepared:
            result = pgconn.exec_prepared(self._name, sent)
            if not _unknown(result, pgconn):
                return _changed(_check(result, pgconn, codec))
            channel.prepared.discard(self._name)  # deallocated meanwhile: prepared again
        _check(pgconn.prepare(self._name, self._sql, None), pgconn, codec)
        channel.prepared.add(self._name)
        return _changed(_check(pgconn.exec_prepared(self._name, sent), pgconn, codec))


_GIVEN: Any = object()
"""Marks a parameter whose value the caller gives (not a literal of the statement)."""


def numbered(sql: str) -> tuple[str, list[str]]:
    """SQLAlchemy's ``%(name)s`` placeholders as libpq's ``$1``, ``$2``…, one number per
    name; return the SQL and the names in number order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PLACEHOLDER.sub(number, sql), names


def text_encoder(kind: TypeEngine[Any]) -> TextEncoder:
    """How a value bound to a column of type ``kind`` is sent as text (as SQLAlchemy's
    own processing would store it); ``TypeError`` for a type without one."""
    if isinstance(kind, JsonDocument):
        return _json
    if isinstance(kind, UTCDateTime):
        return _timestamp
    if isinstance(kind, HexUuid):
        return _hex_uuid
    if isinstance(kind, Integer | String):  # String covers Text and VARCHAR
        return _str
    raise TypeError(f"no text encoding for a parameter of type {kind!r}")


def _json(value: Any) -> str | None:
    return None if value is None else canonical_json(value)  # None is SQL NULL, as stored


def _timestamp(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def _hex_uuid(value: str | None) -> str | None:
    return None if value is None else value.lower()


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _unknown(result: Any, pgconn: Any) -> bool:
    """Whether the statement failed because its name is not prepared on the connection
    (a ``DEALLOCATE ALL`` may have dropped it; the connection is fine)."""
    return bool(
        result.status not in _DONE
        and pgconn.status == pq.ConnStatus.OK
        and result.error_field(pq.DiagnosticField.SQLSTATE) == _NOT_PREPARED
    )


def _changed(result: Any) -> Outcome:
    return Outcome([], int(result.command_tuples or 0))


def _check(result: Any, pgconn: Any, codec: str) -> Any:
    """The result, or its error raised as psycopg raises it."""
    if result.status in _DONE:
        return result
    if pgconn.status == pq.ConnStatus.BAD:  # the server went away: the connection is closed
        raise OperationalError(pgconn.get_error_message(codec))
    raise error_from_result(result, encoding=codec)
