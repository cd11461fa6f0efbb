"""Finding a pooler that lends PostgreSQL's server connections per transaction.

Behind PgBouncer in transaction mode (and other poolers that work that way) a database URL
needs ``pooling=transaction`` (``store.engine``): without it the first statement prepared
by name fails on a server connection that never prepared it, and a worker's runs are given
back, again and again, instead of run. Started that way, a long-running process says so and
exits instead. (Statement mode allows no transaction at all: Signoff cannot run behind it.)

Connected directly, or through a pooler lending by session, a client connection runs every
statement on one server process, and two client connections open at the same time never
share one. So the probe opens two, and each in turn reads ``pg_backend_pid()`` in a
transaction of its own, a few times: two pids read by one connection that differ, or one
pid read by both, mean a pooler lends server connections per transaction. PgBouncer lends
the connection given back last (found at the first try: both read one pid); with
``server_round_robin`` it lends them in turn (one connection reads another pid at its next
transaction). Nothing is prepared (a prepared statement would not outlast the transaction
there).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from agent_runtime.exceptions import InvalidConfiguration
from store.engine import POOLING, transaction_pooled
from store.errors import translated

TRIES = 3


def lends_per_transaction(engine: Engine, tries: int = TRIES) -> bool:
    """Whether a pooler between ``engine`` and PostgreSQL was seen lending one server
    connection to two client connections open at once (``StoreUnavailable`` if the
    database cannot be reached)."""
    if engine.dialect.name != "postgresql":
        return False
    with translated():
        first, second = engine.raw_connection(), engine.raw_connection()
        try:
            seen: tuple[set[int], set[int]] = (set(), set())
            for _ in range(tries):
                for pids, connection in zip(seen, (first, second), strict=True):
                    pids.add(_backend_pid(connection.driver_connection))
                if len(seen[0]) > 1 or len(seen[1]) > 1 or seen[0] & seen[1]:
                    return True
            return False
        finally:
            first.close()
            second.close()


def _backend_pid(connection: Any) -> int:
    """The server process of a transaction of its own on ``connection`` (psycopg's)."""
    pid = connection.execute("SELECT pg_backend_pid()", prepare=False).fetchone()[0]
    connection.commit()
    return int(pid)


def check_pooling(engine: Engine) -> None:
    """Raise ``InvalidConfiguration`` if a pooler lends ``engine``'s server connections per
    transaction and its URL does not say ``pooling=transaction``."""
    if transaction_pooled(engine) or not lends_per_transaction(engine):
        return
    raise InvalidConfiguration(UNDECLARED)


UNDECLARED = (
    "a connection pooler lends this database's server connections per transaction (as"
    f" PgBouncer's transaction mode does): add {POOLING}=transaction to the database URL"
    " (then no LISTEN is held: wake-ups between processes come at their poll), or pool"
    " by session"
)
