"""Connections the server closed while they sat idle, found before they are used.

PostgreSQL closes a session when an administrator terminates it (``pg_terminate_backend``),
when the server shuts down or restarts, or when ``idle_session_timeout`` passes. It says so
by sending an error and closing its end; the client learns of it only at its next
statement, which then fails although it never reached the server, and the work that sent
it fails with it (a delivery left claimed until its claim lapses, a click answered with an
error). An idle connection otherwise has nothing to read, so a readable socket means the
server has spoken first, which it does only to say goodbye. ``hung_up`` checks that
without a round trip (one ``poll`` that does not wait): the engine's pool replaces such a
connection when it is checked out (``discard_hung_up``), and ``store.driver`` before it
lends one of its own.
"""

from __future__ import annotations

import select
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError


def hung_up(dbapi_connection: Any) -> bool:
    """Whether the server has closed this idle driver connection (never for SQLite's,
    which have no server)."""
    pgconn = getattr(dbapi_connection, "pgconn", None)
    if pgconn is None:
        return False
    try:
        socket = pgconn.socket
    except Exception:  # closed or broken already
        return True
    waiting = select.poll()
    waiting.register(socket, select.POLLIN)
    return bool(waiting.poll(0))


def discard_hung_up(engine: Engine) -> None:
    """Make ``engine``'s pool replace a connection the server closed while it was idle, at
    checkout (SQLAlchemy opens another in its place)."""
    event.listen(engine, "checkout", _refuse_hung_up)


def _refuse_hung_up(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    if hung_up(dbapi_connection):
        raise DisconnectionError("the server closed this connection while it was idle")


__all__ = ["discard_hung_up", "hung_up"]
