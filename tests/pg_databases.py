"""Databases of a test's own on the PostgreSQL server the tests use."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url


@contextmanager
def fresh_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new, empty database on ``server_url``'s server for the block (its URL, named
    ``prefix_<random>``), dropped afterwards with any connection still open to it."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = make_url(server_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
