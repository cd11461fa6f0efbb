"""Shared fixtures: a throw-away PostgreSQL database per session, SQLite files, stores."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from sqlalchemy import Connection, delete, insert, text

from agent_runtime import Store
from agent_runtime.audit import AUDIT_SHARDS, genesis
from agent_runtime.testing import InMemoryStore
from store import SqlStore, build_engine, open_store
from store.models import audit_head, metadata
from tests.pg_databases import fresh_database

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
EVERY_TABLE = tuple(t.name for t in metadata.sorted_tables if t.name != "audit_head")
"""Every table a test may fill (the audit head is reset instead)."""


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's own SIGNOFF_* and SLACK_* variables out of every test."""
    for name in list(os.environ):
        if name.startswith(("SIGNOFF_", "SLACK_")) and name != "SIGNOFF_TEST_PG_URL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(scope="session")
def pg_server_url() -> str:
    """The PostgreSQL server the tests use (never skipped: a missing server fails the run)."""
    return os.environ.get("SIGNOFF_TEST_PG_URL", DEFAULT_PG)


@pytest.fixture(scope="session")
def pg_url(pg_server_url: str) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test session, dropped at the end."""
    with fresh_database(pg_server_url, "signoff_test") as url:
        engine = build_engine(url)
        try:
            from store import upgrade

            upgrade(engine)
            yield url
        finally:
            engine.dispose()


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[SqlStore]:
    """A PostgreSQL store emptied before the test."""
    store = open_store(pg_url, migrate=False)
    with store.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(EVERY_TABLE)}"))
        reset_audit_heads(conn)
    yield store
    store.engine.dispose()


def reset_audit_heads(conn: Connection) -> None:
    """Give every audit shard the head of its empty chain (after its entries were removed),
    a head row a test deleted included."""
    conn.execute(delete(audit_head))
    conn.execute(
        insert(audit_head),
        [{"shard": shard, "seq": 0, "hash": genesis(shard)} for shard in range(AUDIT_SHARDS)],
    )


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of a new SQLite file in the test's temporary directory."""
    return f"sqlite:///{tmp_path / 'signoff.db'}"


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to the head once per test process, to copy (never to open)."""
    path = tmp_path_factory.mktemp("migrated") / "signoff.db"
    open_store(f"sqlite:///{path}").engine.dispose()
    return path


@pytest.fixture
def migrated_sqlite_url(tmp_path: Path, migrated_sqlite: Path) -> str:
    """The URL of a new SQLite file in the test's temporary directory, already migrated: a
    copy of ``migrated_sqlite``, the very schema a fresh migration makes."""
    path = tmp_path / "signoff.db"
    shutil.copyfile(migrated_sqlite, path)
    return f"sqlite:///{path}"


@pytest.fixture
def sqlite_store(migrated_sqlite_url: str) -> Iterator[SqlStore]:
    """A migrated SQLite store in a fresh file."""
    store = open_store(migrated_sqlite_url)
    yield store
    store.engine.dispose()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest) -> Store:
    """Each Store implementation in turn: the contract suite runs against all of them."""
    if request.param == "memory":
        return InMemoryStore()
    fixture = "sqlite_store" if request.param == "sqlite" else "pg_store"
    store: Store = request.getfixturevalue(fixture)
    return store


# Property tests: few examples, the same ones on every run (derandomized, no example
# database), no per-example deadline (the machine may be loaded).
settings.register_profile(
    "signoff",
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("signoff")
