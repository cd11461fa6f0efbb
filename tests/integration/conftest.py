"""Fixtures of the Slack scenario tests: ``slack_harness`` worlds on SQLite or PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.slack_harness import (
    APPROVER,
    SECOND_APPROVER,
    BotInstance,
    SlackWorld,
    empty_postgres,
)


@pytest.fixture
def world(tmp_path: Path, sqlite_url: str) -> Iterator[SlackWorld]:
    """The provider, the fake Slack and one Signoff instance on a fresh SQLite file."""
    with SlackWorld(tmp_path, sqlite_url) as built:
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
