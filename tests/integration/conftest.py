"""Fixtures of the Slack scenario tests (``slack_harness`` worlds on SQLite or PostgreSQL), of
the start-up tests (a PostgreSQL server of the test's own, stopped), a brand-new database on
each backend, and the command line run in the test's own process or forked from a warm
launcher."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest
from sqlalchemy import Engine

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
from tests.pg_databases import fresh_database


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
    database = (
        nullcontext(f"sqlite:///{tmp_path / 'migrations.db'}")
        if request.param == "sqlite"
        else fresh_database(pg_server_url, "signoff_migrations")
    )
    with database as url:
        engine = build_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()
