"""Build SQLAlchemy engines with the settings Signoff relies on for each database."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import ConnectionPoolEntry

from agent_runtime.exceptions import InvalidConfiguration
from store.hangups import discard_hung_up
from store.url_passwords import masked_url

SQLITE_BUSY_TIMEOUT_S = 30
READ_ONLY = "signoff_read_only"
"""The execution option of connections that only read (see ``reader``)."""
POOLING = "pooling"
"""The PostgreSQL URL's query parameter naming how a pooler between Signoff and the server
lends server connections: ``session`` (or none: each client keeps one server connection
for its whole session) or ``transaction`` (each transaction may run on another)."""
POOLING_MODES = ("session", "transaction")
NETWORK_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
"""libpq's settings a PostgreSQL URL gets unless it sets them itself. Without them a
connection to a host that never answers waits as long as the operating system's TCP does
(minutes), a statement sent into a network partition waits for TCP's retransmissions to
give up (about 15 minutes on Linux), and an idle connection, the wake-up listener's say,
to a server that died without closing it is never found out. With them a connection
attempt gives up after 10 s, sent data unacknowledged for 30 s ends the connection, and
an idle connection is probed after 30 s of silence (ended if 3 probes 10 s apart go
unanswered)."""
TRANSACTION_POOLED = "signoff_transaction_pooled"
"""The execution option of an engine behind a transaction pooler (see ``transaction_pooled``)."""


def build_engine(url: str) -> Engine:
    """Return an SQLite (WAL, full sync, immediate transactions) or PostgreSQL engine."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise InvalidConfiguration(f"not a database URL: {masked_url(url)}") from None
    if POOLING in parsed.query and parsed.get_backend_name() != "postgresql":
        raise InvalidConfiguration(f"{POOLING}= in the database URL is for PostgreSQL only")
    if parsed.get_backend_name() == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise InvalidConfiguration(
                "an in-memory SQLite database is not durable: name a file, e.g. sqlite:///signoff.db"
            )
        return _sqlite_engine(url)
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        pooling = parsed.query.get(POOLING, "session")
        if pooling not in POOLING_MODES:
            raise InvalidConfiguration(
                f"{POOLING}={pooling!r} in the database URL: use {' or '.join(POOLING_MODES)}"
            )
        _check_options(parsed.query)
        by_transaction = pooling == "transaction"
        unset = {k: v for k, v in NETWORK_DEFAULTS.items() if k not in parsed.query}
        engine = create_engine(
            parsed.difference_update_query([POOLING]).update_query_dict(unset),
            pool_size=10,
            max_overflow=20,
            pool_pre_ping=False,
            # behind a transaction pooler a statement prepared by name on one server
            # connection is unknown on the next (or already there under another client)
            connect_args={"prepare_threshold": None} if by_transaction else {},
            execution_options={TRANSACTION_POOLED: by_transaction},
        )
        discard_hung_up(engine)  # instead of a ping's round trip at every checkout
        return engine
    backend = parsed.get_backend_name()
    raise InvalidConfiguration(f"unsupported database {backend!r}: use sqlite or postgresql")


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def configure(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def begin(connection: Any) -> None:
        # A writing transaction takes the write lock up front: a deferred one that reads and
        # then writes fails with SQLITE_BUSY under concurrency instead of waiting its turn.
        # A reading one never needs it: in WAL mode it reads a snapshot beside any writer.
        reading = connection.get_execution_options().get(READ_ONLY, False)
        connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")

    return engine


def _check_options(query: Mapping[str, object]) -> None:
    """Refuse a PostgreSQL URL's query parameter neither libpq nor Signoff knows (libpq would
    refuse it at every connection, deep in whatever tried to connect)."""
    from psycopg import pq

    known = {option.keyword.decode() for option in pq.Conninfo.get_defaults()}
    unknown = sorted(set(query) - known - {POOLING})
    if unknown:
        hint = f" (a pooler's mode is {POOLING}=session or {POOLING}=transaction)"
        raise InvalidConfiguration(
            f"unknown parameter {unknown[0]!r} in the database URL"
            + (hint if "pool" in unknown[0].lower() else "")
        )


def transaction_pooled(engine: Engine) -> bool:
    """Whether ``engine`` reaches PostgreSQL through a pooler in transaction mode (its URL
    says ``pooling=transaction``): nothing that lives in a session (a statement prepared by
    name, ``LISTEN``) outlasts a transaction there."""
    return bool(engine.get_execution_options().get(TRANSACTION_POOLED, False))


def reader(engine: Engine) -> Engine:
    """Return ``engine`` for transactions that only read (on SQLite: without the write lock)."""
    return engine.execution_options(**{READ_ONLY: True})
