"""Signoff's SQL storage: the runtime's Store on SQLite (embedded default) and PostgreSQL."""

from store.engine import DEFAULT_URL, build_engine
from store.errors import translated
from store.migrate import upgrade
from store.sql_store import SqlStore


def open_store(url: str = DEFAULT_URL, *, migrate: bool = True) -> SqlStore:
    """Connect to ``url``, bring its schema up to date (unless told not to) and return the store."""
    engine = build_engine(url)
    if migrate:
        with translated():
            upgrade(engine)
    return SqlStore(engine)


__all__ = ["DEFAULT_URL", "SqlStore", "build_engine", "open_store", "upgrade"]
