"""The store's driver connections fail as the engine's connections do."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

import pytest
from sqlalchemy import create_engine

from agent_runtime import StoreUnavailable
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
