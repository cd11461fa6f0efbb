"""The driver connections of the hot path: few however many threads run statements, open
before they are needed, and failing as the engine's connections do."""

from __future__ import annotations

import os
import socket
import threading
from datetime import UTC, datetime

import psycopg
import pytest
from sqlalchemy import Column, Engine, Integer, create_engine, event, text

from agent_runtime import StoreUnavailable
from store import SqlStore, open_store
from store.driver import DriverConnections, Prepared
from store.errors import translated
from store.replay_guard import SqlReplayGuard
from tests.integration import wait_until

LOCK = 7_361_001
THREADS = 5
MOST = 2


def test_statements_beyond_the_bound_wait_for_a_connection(pg_store: SqlStore) -> None:
    """With five threads blocked in statements and a bound of two, the database sees two
    connections running them; the others wait their turn, and all run once released."""
    engine = pg_store.engine
    connections = DriverConnections(engine, most=MOST)
    blocked = Prepared(text(f"SELECT pg_advisory_xact_lock_shared({LOCK})"), engine.dialect)
    done: list[int] = []

    def run(index: int) -> None:
        connections.execute(blocked, {})
        done.append(index)

    def running() -> int:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE query LIKE 'SELECT pg_advisory_xact_lock_shared%' "
                        "AND datname = current_database()"
                    )
                ).scalar_one()
            )

    with engine.connect() as holder:
        holder.execute(text(f"SELECT pg_advisory_lock({LOCK})"))
        threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        wait_until(lambda: running() == MOST, timeout=30, what="two statements blocked")
        seen = [running() for _ in range(20)]
        holder.execute(text(f"SELECT pg_advisory_unlock({LOCK})"))
        holder.commit()
    for thread in threads:
        thread.join(30)
    assert max(seen) == MOST
    assert sorted(done) == list(range(THREADS))
    connections.close()


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


PID = text("SELECT pg_backend_pid()")


def _terminate(engine: Engine, pid: int) -> None:
    """Terminate the session ``pid`` from another connection, and wait until it is gone."""
    with psycopg.connect(_libpq(engine), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

        def gone() -> bool:
            row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
            return row.fetchone() == (0,)

        wait_until(gone, timeout=30, what=f"session {pid} to end")


def _libpq(engine: Engine) -> str:
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


def test_a_driver_connection_the_server_closed_while_idle_is_replaced(
    pg_store: SqlStore,
) -> None:
    """A driver connection whose session was terminated while idle is not lent again: the
    next statement runs on a new one instead of failing."""
    engine = pg_store.engine
    connections = DriverConnections(engine, most=1, checked_after=0)
    pid = Prepared(PID, engine.dialect, (Column("pid", Integer),))
    first = connections.execute(pid, {}, fetch=True).rows[0][0]
    _terminate(engine, first)
    second = connections.execute(pid, {}, fetch=True).rows[0][0]
    assert second != first
    connections.close()


def test_a_connection_given_back_a_moment_ago_is_lent_unchecked_and_its_failure_is_an_outage(
    pg_store: SqlStore,
) -> None:
    """A connection given back within ``checked_after`` is lent without the hang-up check:
    if its session ended meanwhile, that statement fails as the store being unavailable
    (as one whose session ends while it runs), and the next runs on a new connection."""
    engine = pg_store.engine
    connections = DriverConnections(engine, most=1, checked_after=3600)
    pid = Prepared(PID, engine.dialect, (Column("pid", Integer),))
    first = connections.execute(pid, {}, fetch=True).rows[0][0]
    _terminate(engine, first)
    with pytest.raises(StoreUnavailable), translated():
        connections.execute(pid, {}, fetch=True)
    second = connections.execute(pid, {}, fetch=True).rows[0][0]
    assert second != first
    connections.close()


def test_a_pooled_connection_the_server_closed_while_idle_is_replaced(
    pg_store: SqlStore,
) -> None:
    """A connection of the engine's pool whose session was terminated while idle is
    replaced at checkout: the next transaction runs instead of failing."""
    engine = pg_store.engine
    engine.dispose()
    with engine.connect() as conn:
        first = conn.execute(PID).scalar_one()
    _terminate(engine, first)
    with engine.connect() as conn:
        second = conn.execute(PID).scalar_one()
    assert second != first


def test_a_forked_child_opens_connections_of_its_own(pg_store: SqlStore) -> None:
    """A child forked while the parent holds an idle driver connection runs its statements
    on a connection of its own, and the parent's goes on serving the parent."""
    engine = pg_store.engine
    connections = DriverConnections(engine, most=1)
    pid = Prepared(PID, engine.dialect, (Column("pid", Integer),))
    parents = connections.execute(pid, {}, fetch=True).rows[0][0]
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe and exits
        code = 1
        try:
            os.write(writing, str(connections.execute(pid, {}, fetch=True).rows[0][0]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(writing)
    with os.fdopen(reading) as report:
        childs = int(report.read() or 0)
    assert os.waitpid(child, 0)[1] == 0
    assert childs not in (0, parents)
    assert connections.execute(pid, {}, fetch=True).rows[0][0] == parents
    connections.close()
