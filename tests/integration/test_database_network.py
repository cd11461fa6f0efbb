"""PostgreSQL connections bound how long the network can keep them waiting: a connection
attempt times out, and every connection's socket carries TCP keepalives and a user
timeout, Signoff's defaults unless the database URL sets its own."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from agent_runtime import StoreUnavailable, new_run_id
from store import SqlStore, open_store
from store.driver import Channel, DriverConnections, Outcome
from store.engine import NETWORK_DEFAULTS

pytestmark = pytest.mark.postgres

GIVE_UP_S = 30.0
"""How long the test waits for a connection attempt that should have given up long before."""


def _socket_options(dbapi_connection: Any) -> dict[str, int]:
    """The keepalive and user-timeout options of the connection's own socket."""
    probe = socket.socket(fileno=socket.dup(dbapi_connection.pgconn.socket))
    try:
        return {
            "keepalives": probe.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "keepalives_idle": probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            "keepalives_interval": probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            "keepalives_count": probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            "tcp_user_timeout": probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        }
    finally:
        probe.close()


def _expected(**changed: str) -> dict[str, int]:
    """Signoff's socket options, with ``changed`` as a URL would set them."""
    settings = NETWORK_DEFAULTS | changed
    return {name: int(value) for name, value in settings.items() if name != "connect_timeout"}


def test_the_pooled_and_the_driver_connections_carry_the_network_defaults(
    pg_store: SqlStore,
) -> None:
    """A URL that sets none of them gets a connect timeout, keepalives and a user timeout,
    on the engine's pooled connections and on the store's own driver connections alike."""
    with pg_store.engine.connect() as conn:
        pooled: Any = conn.connection.dbapi_connection
        assert _socket_options(pooled) == _expected()
        assert pooled.info.get_parameters()["connect_timeout"] == "10"
    connections = DriverConnections(pg_store.engine)
    try:
        assert connections.execute(_SocketOptions(), {}).rows == [_expected()]
    finally:
        connections.close()


def test_a_url_keeps_its_own_network_settings(pg_url: str) -> None:
    """Settings the URL names are the URL's; the others are Signoff's defaults."""
    url = make_url(pg_url).update_query_dict({"keepalives_idle": "5", "connect_timeout": "3"})
    store = open_store(url.render_as_string(hide_password=False), migrate=False)
    try:
        with store.engine.connect() as conn:
            dbapi_connection: Any = conn.connection.dbapi_connection
            assert _socket_options(dbapi_connection) == _expected(keepalives_idle="5")
            assert dbapi_connection.info.get_parameters()["connect_timeout"] == "3"
    finally:
        store.engine.dispose()


def test_a_server_that_never_answers_is_unavailable_once_the_connect_timeout_passes() -> None:
    """A server that accepts the connection and never answers makes the store unavailable
    once the connect timeout passes, instead of holding the caller for as long as TCP would."""
    with _silent_server() as port:
        url = f"postgresql+psycopg://signoff@127.0.0.1:{port}/signoff?connect_timeout=1"
        store = open_store(url, migrate=False)
        failed: list[BaseException] = []

        def read() -> None:
            try:
                store.get_run(new_run_id())
            except BaseException as exc:
                failed.append(exc)

        reading = threading.Thread(target=read, daemon=True)
        reading.start()
        reading.join(GIVE_UP_S)
        assert not reading.is_alive(), "the connection attempt did not give up"
        store.engine.dispose()
    assert len(failed) == 1, failed
    assert isinstance(failed[0], StoreUnavailable), failed


@contextmanager
def _silent_server() -> Iterator[int]:
    """A loopback port whose server accepts connections and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not done.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    accepting = threading.Thread(target=accept, daemon=True)
    accepting.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        done.set()
        accepting.join()
        for conn in accepted:
            conn.close()
        listener.close()


class _SocketOptions:
    """A driver statement that runs no SQL: it reads its connection's socket options."""

    sql = "-- the socket's options"

    def params(self, values: Mapping[str, Any]) -> Any:
        """No parameters."""
        return values

    def run(self, channel: Channel, params: Any, fetch: bool) -> Outcome:
        """The options of the socket of the connection it was lent."""
        return Outcome([_socket_options(channel.connection)], 0)
