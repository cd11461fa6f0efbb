"""The one serving helper: dropped connections, taken ports and the raw request target."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Callable
from contextlib import closing
from typing import Any

import pytest

from bot.app.serving import DropConnection, PortInUse, serve_wsgi


def _echo_or_drop(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    if environ["PATH_INFO"] == "/drop":
        raise DropConnection
    body = environ["REQUEST_URI"].encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def _get(port: int, target: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", target)
    return connection.getresponse()


def test_an_application_can_drop_the_connection_without_an_answer() -> None:
    """``DropConnection`` closes the connection: the client gets no status line at all."""
    with serve_wsgi(_echo_or_drop, 0, "127.0.0.1", name="drop") as serving:
        with pytest.raises(http.client.RemoteDisconnected):
            _get(serving.port, "/drop")
        assert _get(serving.port, "/after").status == 200


def test_the_request_target_reaches_the_application_as_sent() -> None:
    """``REQUEST_URI`` is the path and query as the client sent them, escapes included."""
    with serve_wsgi(_echo_or_drop, 0, "127.0.0.1", name="echo") as serving:
        answer = _get(serving.port, "/v1/refunds%2Fx?idempotency_key=a%20b")
        assert answer.read() == b"/v1/refunds%2Fx?idempotency_key=a%20b"


def test_a_taken_port_is_a_settings_error_naming_the_setting() -> None:
    """A port another socket listens on: PortInUse, naming the port and the flag to change."""
    with closing(socket.socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUse, match=rf"port {port} on 127.0.0.1 is already in use \(--x\)"):
            serve_wsgi(_echo_or_drop, port, "127.0.0.1", name="taken", flag="--x")
