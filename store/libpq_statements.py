"""The hot path's statements on PostgreSQL through libpq's own call: the journal's append,
a run's end, the claim and the journal load.

Every journaled step is one fenced ``INSERT``. Through a psycopg cursor the statement
costs the client about twice what libpq itself needs: the cursor adapts each parameter,
rewrites the query's placeholders, keeps its prepared-statement cache and drives the
protocol from Python generators (≈ 40 µs a statement, as much as the rest of a step;
``python -m bench.steps --only journal`` measures it). A ``LibpqPrepared`` statement is
prepared by name once on each driver connection it runs on (``PQprepare``) and then
executed with ``PQexecPrepared``, which releases the GIL while it waits (behind a
transaction pooler, where a name prepared on one server connection is unknown on the next,
it is sent whole each time with ``PQexecParams``); its parameters go
as text, encoded by the type of the column they are bound to (``store.plain_statements``).
The SQL is SQLAlchemy's, with its placeholders numbered, so the statement is the very one
``Prepared`` runs. Rows (the claim's runs, a journal's entries) are loaded by the
connection's own psycopg loaders and decoded by their columns' SQLAlchemy types, as
``Prepared`` decodes a cursor's.

Errors come out as psycopg raises them (a unique violation as ``UniqueViolation``, a
connection the server closed as ``OperationalError``, leaving the connection closed), so
``DriverConnections`` wraps and handles them as it does a cursor's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from psycopg import OperationalError, pq
from psycopg.adapt import Transformer
from psycopg.errors import error_from_result
from sqlalchemy import Column, Dialect
from sqlalchemy.sql import ClauseElement

from store.driver import Channel, Outcome, RowDecoder
from store.plain_statements import plain_params

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")
_DONE = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
_NOT_PREPARED = b"26000"  # invalid_sql_statement_name: no prepared statement of that name


class LibpqPrepared:
    """A PostgreSQL statement prepared as ``name`` on each driver connection it runs on,
    executed by libpq with its parameters as text. Given the columns it returns, its rows
    are loaded by the connection's own psycopg loaders and decoded by the columns' types,
    as a cursor's rows are (``store.driver.Prepared``)."""

    def __init__(
        self,
        statement: ClauseElement,
        dialect: Dialect,
        name: str,
        returns: Iterable[Column[Any]] = (),
    ) -> None:
        if dialect.name != "postgresql":
            raise ValueError(f"libpq statements are PostgreSQL's, not {dialect.name}'s")
        compiled = statement.compile(dialect=dialect)
        self.sql, order = numbered(compiled.string)
        self._params = plain_params(compiled, dialect, order)
        self._name = name.encode()
        self._sql = self.sql.encode()
        self._rows = RowDecoder(returns, dialect)

    def params(self, values: Mapping[str, Any]) -> list[Any] | dict[str, Any]:
        """The statement's parameters as text, in placeholder order (``KeyError`` if a bind
        has no value; the literals it was built with are its own)."""
        return self._params(values)

    def run(self, channel: Channel, params: list[str | None], fetch: bool) -> Outcome:
        """Execute on ``channel``'s connection (preparing the statement there first if it
        is new to it); return how many rows it changed, and its rows if ``fetch``."""
        pgconn = channel.connection.pgconn
        sent = [None if p is None else p.encode(channel.codec) for p in params]
        if channel.by_name:
            result = self._by_name(channel, sent)
        else:
            result = pgconn.exec_params(self._sql, sent)
        _check(result, pgconn, channel.codec)
        rows = self._rows(_loaded(result, channel)) if fetch else []
        return Outcome(rows, int(result.command_tuples or 0))

    def _by_name(self, channel: Channel, sent: list[bytes | None]) -> Any:
        """The result of the statement prepared as its name on the channel's connection."""
        pgconn = channel.connection.pgconn
        if self._name in channel.prepared:
            result = pgconn.exec_prepared(self._name, sent)
            if not _unknown(result, pgconn):
                return result
            channel.prepared.discard(self._name)  # deallocated meanwhile: prepared again
        _check(pgconn.prepare(self._name, self._sql, None), pgconn, channel.codec)
        channel.prepared.add(self._name)
        return pgconn.exec_prepared(self._name, sent)


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


def _unknown(result: Any, pgconn: Any) -> bool:
    """Whether the statement failed because its name is not prepared on the connection
    (a ``DEALLOCATE ALL`` may have dropped it; the connection is fine)."""
    return bool(
        result.status not in _DONE
        and pgconn.status == pq.ConnStatus.OK
        and result.error_field(pq.DiagnosticField.SQLSTATE) == _NOT_PREPARED
    )


def _loaded(result: Any, channel: Channel) -> list[tuple[Any, ...]]:
    """The result's rows as the connection's psycopg loaders read them (as its cursor would),
    by the channel's loader (made on first use: making one costs as much as loading a row)."""
    if channel.loader is None:
        channel.loader = Transformer(channel.connection)
    channel.loader.set_pgresult(result)
    try:
        rows: list[tuple[Any, ...]] = channel.loader.load_rows(0, result.ntuples, tuple)
    finally:
        channel.loader.set_pgresult(None)  # not kept: a journal's result can be large
    return rows


def _check(result: Any, pgconn: Any, codec: str) -> Any:
    """The result, or its error raised as psycopg raises it."""
    if result.status in _DONE:
        return result
    if pgconn.status == pq.ConnStatus.BAD:  # the server went away: the connection is closed
        raise OperationalError(pgconn.get_error_message(codec))
    raise error_from_result(result, encoding=codec)
