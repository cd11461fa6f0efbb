"""The two ways a store talks to its database: a write transaction and a read-only one.

Both turn connection failures into ``StoreUnavailable``. A write transaction wakes this
process's workers after it commits if it asked to (``store.notify``); a read takes no
write lock on SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine

from store.engine import reader
from store.errors import translated
from store.notify import transaction


@contextmanager
def writing(engine: Engine) -> Iterator[Connection]:
    """A transaction for statements that change the database."""
    with translated(), transaction(engine) as conn:
        yield conn


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A transaction that only reads."""
    with translated(), reader(engine).begin() as conn:
        yield conn


__all__ = ["reading", "writing"]
