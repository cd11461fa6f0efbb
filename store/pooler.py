"""Finding a pooler that lends PostgreSQL's server connections per transaction.

Behind PgBouncer in transaction or statement mode (and other poolers that work that way) a
database URL needs ``pooling=transaction`` (``store.engine``): without it the first
statement prepared by name fails on a server connection that never prepared it, and a
worker's runs are given back, again and again, instead of run. Started that way, a
long-running process says so and exits instead.

Connected directly, or through a pooler lending by session, two client connections open at
the same time never run statements on one server process. So when each of two, opened
together, ends a transaction and then reads ``pg_backend_pid()`` and both read the same
pid, a pooler lent one server connection to both in turn. The converse proves nothing (a
pooler may lend another idle server connection), so the probe tries a few times; PgBouncer
lends the connection given back last by default, and is found at the first.
"""

from __future__ import annotations

from sqlalchemy import Engine, text

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
    pid = text("SELECT pg_backend_pid()")
    with translated(), engine.connect() as first, engine.connect() as second:
        for _ in range(tries):
            mine = first.execute(pid).scalar_one()
            first.commit()
            theirs = second.execute(pid).scalar_one()
            second.commit()
            if mine == theirs:
                return True
    return False


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
