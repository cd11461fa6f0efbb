"""The store's driver connections fail as the engine's connections do."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

import pytest
from sqlalchemy import create_engine, event

from agent_runtime import StoreUnavailable
from store import open_store
from store.replay_guard import SqlReplayGuard


def closed_port() -> int:
    """A loopback port nothing listens on (the OS's pick, released at once)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_database_that_refuses_connections_is_unavailable_to_the_replay_guard() -> None:
    """Recording a Slack request's signature with the database down raises
    ``StoreUnavailable`` (which the request is answered and retried on), not the driver's
    own error (which was answered as an unknown failure)."""
    engine = create_engine(f"postgresql+psycopg://signoff@127.0.0.1:{closed_port()}/signoff")
    try:
        with pytest.raises(StoreUnavailable):
            SqlReplayGuard(engine).first_time("v0=" + "0" * 64, datetime.now(UTC))
    finally:
        engine.dispose()


def test_a_warmed_replay_guard_has_its_connections_open_before_requests_come(
    sqlite_url: str,
) -> None:
    """``warm(n)`` opens n connections for the writes before acks, at start and once:
    warming again opens none, and recording a request's signature opens none."""
    open_store(sqlite_url).engine.dispose()  # the schema
    engine = create_engine(sqlite_url)
    opened: list[object] = []
    event.listen(engine, "connect", lambda *args: opened.append(args))
    guard = SqlReplayGuard(engine)
    try:
        guard.warm(3)
        assert len(opened) == 3
        guard.warm(3)
        assert guard.first_time("v0=" + "0" * 64, datetime.now(UTC))
        assert len(opened) == 3
    finally:
        engine.dispose()
