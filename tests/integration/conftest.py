"""Fixtures of the Slack scenario tests (``slack_harness`` worlds on SQLite or PostgreSQL), of
the start-up tests (a PostgreSQL server of the test's own, stopped), a brand-new database on
each backend, and the command line run in the test's own process or forked from a warm
launcher."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import Engine, make_url

from store import build_engine
from tests.integration.in_process import InProcessCli
from tests.integration.pgbouncer import reached
from tests.integration.private_postgres import PrivatePostgres, server_binaries
from tests.integration.serve_cluster import Cluster, open_cluster
from tests.integration.slack_harness import (
    APPROVER,
    SECOND_APPROVER,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_steps import (
    empty_postgres,
)
from tests.integration.worker_processes import (
    Launcher,
)
from tests.integration.workspaces_world import ALPHA_CODE, BETA_CODE, TwoWorkspaces, install


@pytest.fixture
def world(tmp_path: Path, migrated_sqlite_url: str) -> Iterator[SlackWorld]:
    """The provider, the fake Slack and one Signoff instance on a fresh SQLite file."""
    with SlackWorld(tmp_path, migrated_sqlite_url) as built:
        built.instance()
        yield built


@pytest.fixture
def bot(world: SlackWorld) -> BotInstance:
    """The world's Signoff instance."""
    return world.instances[0]


@pytest.fixture
def pg_world(tmp_path: Path, pg_url: str) -> Iterator[SlackWorld]:
    """A world on the session's PostgreSQL database, emptied first, with two approvers."""
    empty_postgres(pg_url)
    with SlackWorld(tmp_path, pg_url, approvers=(APPROVER, SECOND_APPROVER)) as built:
        yield built


@pytest.fixture
def stopped_pg() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of this test's own, stopped: nothing listens on its port yet."""
    binaries = server_binaries()
    if binaries is None:
        pytest.fail("no PostgreSQL server binaries under /usr/lib/postgresql")
    with PrivatePostgres(binaries) as server:
        server.stop()
        yield server


@pytest.fixture(params=["direct", "session-pooled", "transaction-pooled"])
def deployed_pg_url(request: pytest.FixtureRequest, pg_url: str) -> Iterator[str]:
    """The session's database as a deployment reaches it: directly, then through a PgBouncer
    of the test's own in session mode, then in transaction mode (the URL saying so)."""
    with reached(request.param, pg_url) as url:
        yield url


@pytest.fixture(params=["direct", "session-pooled"])
def listening_pg_url(request: pytest.FixtureRequest, pg_url: str) -> Iterator[str]:
    """The session's database reached where ``LISTEN`` works: directly, then through a
    PgBouncer in session mode."""
    with reached(request.param, pg_url) as url:
        yield url


@pytest.fixture
def cli_here(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> InProcessCli:
    """``signoff`` through ``bot.cli.main.main`` in this process, its output captured."""
    return InProcessCli(monkeypatch, capsys)


@pytest.fixture(scope="session")
def launcher() -> Iterator[Launcher]:
    """One launcher per test process: ``signoff`` commands forked from it are processes of
    their own that skip the interpreter start and the imports."""
    with Launcher() as started:
        yield started


@pytest.fixture
def cluster(tmp_path: Path, pg_url: str) -> Iterator[Cluster]:
    """An emptied database, the provider and the fake Slack; no serve process yet."""
    empty_postgres(pg_url)
    with open_cluster(tmp_path, pg_url) as built:
        yield built


@pytest.fixture
def deployed_cluster(tmp_path: Path, pg_url: str, deployed_pg_url: str) -> Iterator[Cluster]:
    """``cluster``, its processes reaching the database directly, then through PgBouncer."""
    empty_postgres(pg_url)
    with open_cluster(tmp_path, deployed_pg_url) as built:
        yield built


@pytest.fixture(params=["sqlite", "postgresql"])
def two(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TwoWorkspaces]:
    """Both workspaces installed through the OAuth flow (beta with a rotating token and its
    refresh token), on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        url: str = request.getfixturevalue("migrated_sqlite_url")
    else:
        url = request.getfixturevalue("pg_url")
        empty_postgres(url)
    with TwoWorkspaces(tmp_path, url) as built:
        bot = built.instance()
        for code in (ALPHA_CODE, BETA_CODE):
            assert install(bot, code).status_code == 200
        yield built


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_engine(
    request: pytest.FixtureRequest, tmp_path: Path, pg_server_url: str
) -> Iterator[Engine]:
    """An engine on a brand-new, empty database: a SQLite file, or a PostgreSQL database
    created for this test and dropped after it."""
    if request.param == "sqlite":
        engine = build_engine(f"sqlite:///{tmp_path / 'migrations.db'}")
        try:
            yield engine
        finally:
            engine.dispose()
        return
    name = f"signoff_migrations_{uuid.uuid4().hex[:10]}"
    admin = (
        make_url(pg_server_url).set(drivername="postgresql").render_as_string(hide_password=False)
    )
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    engine = build_engine(
        make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    )
    try:
        yield engine
    finally:
        engine.dispose()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
