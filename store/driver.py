"""The hot path's statements on driver connections of their own.

A run's claim, each journal entry and its completion are one short statement each, and
each is a transaction of its own. Run through SQLAlchemy's ``Connection`` they cost more
client time than the database takes to run them (a pool checkout, isolation-level
switches, the execution context, the result wrapper: ``bench.steps`` measures it). Here a
Core statement is compiled once (``Prepared``) and executed on a driver connection in
autocommit mode (``DriverConnections``): one round trip, no BEGIN and COMMIT, no
checkout, no per-call compilation. Parameters are encoded and result columns decoded
by the statement's own SQLAlchemy types, so values read and write exactly as elsewhere.
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Column, Dialect, Engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Compiled
from sqlalchemy.sql import ClauseElement
from sqlalchemy.types import TypeEngine

from store.engine import transaction_pooled
from store.hangups import hung_up

Encoder = Callable[[Any], Any]
MOST_CONNECTIONS = 8
"""The most driver connections one ``DriverConnections`` holds at once."""
CHECKED_AFTER_S = 0.1
"""A connection idle this long is checked for a server that hung up before it is lent
again (``store.hangups``); one given back more recently is lent as it is."""


class Statement(Protocol):
    """What ``DriverConnections`` runs: SQL compiled once, its parameters made from values
    by bind name, and a way to execute it on a driver connection."""

    sql: str

    def params(self, values: Mapping[str, Any]) -> Any:
        """The driver parameters for ``values`` (by bind name)."""

    def run(self, channel: Channel, params: Any, fetch: bool) -> Outcome:
        """Execute with ``params`` on ``channel``; the rows only if ``fetch``."""


class BoundParams:
    """A compiled statement's driver parameters from values by bind name: each encoded by
    the encoder ``encoder_for`` gives its bind's type (None: passed as it is), the
    literals the statement was built with encoded once, here. In ``order`` (a list for a
    statement with positional placeholders), else by name (a dict)."""

    def __init__(
        self,
        compiled: Compiled,
        encoder_for: Callable[[TypeEngine[Any]], Encoder | None],
        order: Sequence[str] | None,
    ) -> None:
        bind_names: Mapping[Any, str] = getattr(compiled, "bind_names", {})
        encoders = {name: encoder_for(bind.type) for bind, name in bind_names.items()}
        fixed = {
            name: _encoded(encoders[name], bind.effective_value)
            for bind, name in bind_names.items()
            if not bind.required
        }
        self._positional = order is not None
        self._fixed = fixed
        self._given = [(name, encoders[name]) for name in encoders if name not in fixed]
        self._order = [(name, encoders[name], fixed.get(name, _GIVEN)) for name in order or ()]

    def __call__(self, values: Mapping[str, Any]) -> list[Any] | dict[str, Any]:
        """The parameters for ``values`` (``KeyError`` if a bind has no value)."""
        if self._positional:  # inline, not through ``_encoded``: it is every statement's
            return [
                fixed
                if fixed is not _GIVEN
                else values[name]
                if encode is None
                else encode(values[name])
                for name, encode, fixed in self._order
            ]
        given = dict(self._fixed)
        for name, encode in self._given:
            given[name] = _encoded(encode, values[name])
        return given


class Prepared:
    """A Core statement compiled once for one dialect, with the encoders of its parameters
    and (given the columns it returns) the decoders of its rows."""

    def __init__(
        self, statement: ClauseElement, dialect: Dialect, returns: Iterable[Column[Any]] = ()
    ) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = compiled.string
        order: Sequence[str] | None = getattr(compiled, "positiontup", None)
        self._params = BoundParams(compiled, lambda kind: _processor(kind, dialect), order)
        self.rows = RowDecoder(returns, dialect)

    def params(self, values: Mapping[str, Any]) -> list[Any] | dict[str, Any]:
        """The driver parameters for ``values`` (by bind name), encoded as SQLAlchemy would
        (``BoundParams``)."""
        return self._params(values)

    def run(self, channel: Channel, params: Any, fetch: bool) -> Outcome:
        """Execute on ``channel``'s cursor; its rows, decoded, if ``fetch``."""
        cursor = channel.cursor
        cursor.execute(self.sql, params)
        rows = self.rows(cursor.fetchall()) if fetch else []
        return Outcome(rows, int(cursor.rowcount))


class RowDecoder:
    """Driver rows of the given columns decoded by their SQLAlchemy types into named tuples
    (attribute access, as SQLAlchemy's rows)."""

    def __init__(self, columns: Iterable[Column[Any]], dialect: Dialect) -> None:
        returned = list(columns)
        self._decoders = [_decoder(column.type, dialect) for column in returned]
        self._row = collections.namedtuple("_row", [c.name for c in returned])  # type: ignore[misc]

    def __call__(self, fetched: Iterable[Sequence[Any]]) -> list[Any]:
        """The rows, decoded."""
        decoders = self._decoders
        return [self._row(*(d(v) for d, v in zip(decoders, row, strict=True))) for row in fetched]


_GIVEN: Any = object()
"""Marks a parameter whose value the caller gives (not a literal of the statement)."""


def _encoded(encode: Encoder | None, value: Any) -> Any:
    return value if encode is None else encode(value)


def _processor(kind: TypeEngine[Any], dialect: Dialect) -> Encoder | None:
    """The type's bind processor on ``dialect``, None where it passes values as they are."""
    encode: Encoder | None = kind.dialect_impl(dialect).bind_processor(dialect)
    return encode


def _decoder(kind: TypeEngine[Any], dialect: Dialect) -> Encoder:
    decode = kind.dialect_impl(dialect).result_processor(dialect, None)
    return decode if decode is not None else _unchanged


def _unchanged(value: Any) -> Any:
    return value


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a statement did: the rows it returned (if asked for) and how many it changed."""

    rows: list[Any]
    rowcount: int


@dataclass(slots=True)
class Channel:
    """A driver connection of our own, with its one cursor and, for
    ``store.libpq_statements`` on PostgreSQL, whether statements may be prepared on it by
    name (not behind a transaction pooler), the names of those prepared on it, the Python
    codec of its client encoding (the session's from its start, as nothing run on these
    connections sets another) and the psycopg loader of its rows, made once."""

    connection: Any
    cursor: Any
    by_name: bool = True
    prepared: set[bytes] = field(default_factory=set)
    codec: str = "utf-8"
    loader: Any = None
    given_back: float = 0.0
    """When it last came back idle (``time.monotonic``; 0 when new)."""

    def close(self) -> None:
        """Close the connection; never raises (it may be broken already)."""
        with contextlib.suppress(Exception):
            self.connection.close()


class DriverConnections:
    """A few autocommit driver connections, outside the engine's pool, for ``Prepared``.

    Each connection is opened through the engine's pool (so it gets the engine's
    settings, SQLite's pragmas for one), detached from it, and put in autocommit mode. A
    statement borrows an idle connection, or opens one, and gives it back afterwards:
    there are never more connections than statements that ran at once, and never more
    than ``most`` (a statement beyond waits for one to come back), so a process that runs
    many runs at once holds a bounded number of the database's connections. A connection
    that fails is closed, never reused (a failure to open one comes out as SQLAlchemy's
    error too), and one the server closed while it was idle is closed before it is lent
    (``store.hangups``); the idle ones are closed when the engine is
    disposed or this object is garbage-collected. A forked child opens its own.

    The hang-up check is a system call, and under load it costs more than it saves: with
    8 runs at once on one worker, checking every statement's connection cost 14 µs of CPU
    a step and 5 to 10 % of the steps per second (``python -m bench.steps --only
    concurrent``), while there a connection comes back every millisecond or two. So a
    connection given back less than ``checked_after`` seconds ago is lent unchecked. If
    the server ended its session in that moment, the statement fails as one does whose
    session ends while it runs (the store is unavailable for it, and the failure disposes
    of the other idle connections, so no second statement meets a closed one); a
    connection idle longer is checked.
    """

    def __init__(
        self, engine: Engine, most: int = MOST_CONNECTIONS, checked_after: float = CHECKED_AFTER_S
    ) -> None:
        self._engine = engine
        self._checked_after = checked_after
        self._idle: list[Channel] = []
        self._most = most
        self._slots = _slots(most)
        event.listen(engine, "engine_disposed", _close_on_dispose(weakref.ref(self)))
        os.register_at_fork(after_in_child=_forget_in_child(weakref.ref(self)))
        weakref.finalize(self, _close_all, self._idle)

    def execute(
        self, statement: Statement, values: Mapping[str, Any], *, fetch: bool = False
    ) -> Outcome:
        """Run ``statement`` with ``values`` as a transaction of its own.

        Driver errors come out wrapped as SQLAlchemy's (see ``store.errors.translated``).
        """
        params = statement.params(values)
        self._slots.get()  # waits while ``most`` statements run
        try:
            channel = self._borrow()
            try:
                outcome = statement.run(channel, params, fetch)
            except BaseException as exc:
                error = self._wrapped(exc, channel, statement.sql, params)  # asks the driver
                channel.close()
                if error is exc:
                    raise
                raise error from exc
            channel.given_back = time.monotonic()
            self._idle.append(channel)
        finally:
            self._slots.put(None)
        return outcome

    def keep_open(self, count: int) -> None:
        """Open connections until ``count`` (at most ``most``) are idle (before they are
        needed: at start)."""
        while len(self._idle) < min(count, self._most):
            self._idle.append(self._open())

    def close(self) -> None:
        """Close the idle connections (statements in flight close theirs when they fail)."""
        _close_all(self._idle)

    def _forked(self) -> None:
        """In a forked child: its parent's connections are not its own."""
        self._idle.clear()  # dropped, not closed: the parent still uses them
        self._slots = _slots(self._most)  # nor are its statements

    def _borrow(self) -> Channel:
        while True:
            try:
                channel = self._idle.pop()  # atomic: no lock needed
            except IndexError:
                return self._open()
            if time.monotonic() - channel.given_back < self._checked_after:
                return channel  # in use a moment ago: not worth a system call (see above)
            if not hung_up(channel.connection):  # store.hangups
                return channel
            channel.close()

    def _open(self) -> Channel:
        dialect = self._engine.dialect
        try:
            pooled = self._engine.raw_connection()
        except dialect.loaded_dbapi.Error as exc:  # wrapped as an engine's connect wraps it
            raise as_sqlalchemy_error(dialect, exc, None, None, None) from exc
        pooled.detach()
        connection: Any = pooled.dbapi_connection
        if self._engine.dialect.name != "postgresql":  # SQLite's autocommit (store.engine)
            return Channel(connection, connection.cursor())
        connection.autocommit = True
        return Channel(
            connection,
            connection.cursor(),
            by_name=not transaction_pooled(self._engine),
            codec=connection.info.encoding,
        )

    def _wrapped(
        self, exc: BaseException, channel: Channel, sql: str, params: Any
    ) -> BaseException:
        """Wrap a driver error as SQLAlchemy does; any other exception is returned as is."""
        error = as_sqlalchemy_error(self._engine.dialect, exc, channel.connection, sql, params)
        if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
            # the server went away: the idle connections are no better, nor the pool's
            self._engine.dispose()  # as SQLAlchemy does; closes the idle ones here too
        return error


def as_sqlalchemy_error(
    dialect: Dialect, exc: BaseException, connection: Any, sql: str | None, params: Any
) -> BaseException:
    """A driver error from ``connection`` wrapped as SQLAlchemy wraps it (marked
    ``connection_invalidated`` if the connection is broken); any other exception as is."""
    if not isinstance(exc, dialect.loaded_dbapi.Error):
        return exc
    return sa_exc.DBAPIError.instance(
        sql,
        params,
        exc,
        dialect.loaded_dbapi.Error,
        connection_invalidated=dialect.is_disconnect(exc, connection, None),
        dialect=dialect,
    )


def _slots(most: int) -> queue.SimpleQueue[None]:
    """``most`` tokens, one taken by each statement while it runs (a semaphore that costs
    a tenth of ``threading.BoundedSemaphore``'s, on every statement of the hot path)."""
    tokens: queue.SimpleQueue[None] = queue.SimpleQueue()
    for _ in range(most):
        tokens.put(None)
    return tokens


def _close_all(idle: list[Channel]) -> None:
    while idle:
        idle.pop().close()


def _forget_in_child(connections: weakref.ref[DriverConnections]) -> Callable[[], None]:
    """Run in a child process right after ``os.fork`` (not a ``getpid`` system call at every
    statement)."""

    def forget() -> None:
        alive = connections()
        if alive is not None:
            alive._forked()

    return forget


def _close_on_dispose(connections: weakref.ref[DriverConnections]) -> Callable[[Engine], None]:
    def closer(engine: Engine) -> None:
        alive = connections()
        if alive is not None:
            alive.close()

    return closer
