"""Serving WSGI applications: the one way every server here listens, product and dev tools.

``serve_wsgi`` serves an application on a background thread, a thread per request (the
operator's port, the dev session's Slack app, the local Slack, the demo provider);
``waitress_wsgi`` serves ``signoff serve``'s front with waitress, also on a background
thread (the main thread waits for the database meanwhile). Both claim the port with
``SO_REUSEADDR``, so a server stopped with Ctrl-C can be started again on the same port at
once, and both turn a taken port into ``PortInUse``.
"""

from __future__ import annotations

import errno
import logging
import socket
import socketserver
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

from bot.app.request_hygiene import MAX_BODY_BYTES, WSGIApp
from bot.app.settings import SettingsError

logger = logging.getLogger(__name__)

HTTP_THREADS = 8
"""Requests ``signoff serve``'s front answers at once (each mostly waits on one INSERT)."""


class PortInUse(SettingsError):
    """Another process already listens on the port a server was asked to use."""

    def __init__(self, host: str, port: int, flag: str) -> None:
        hint = f" ({flag})" if flag else ""
        super().__init__(f"port {port} on {host} is already in use{hint}")
        self.host = host
        self.port = port


class DropConnection(Exception):
    """Raised by an application to close the connection with no answer at all."""


class WsgiServer(socketserver.ThreadingMixIn, WSGIServer):
    """A WSGI server answering each request on a thread of its own."""

    daemon_threads = True
    allow_reuse_address = True  # a restart must not wait out the TIME_WAIT of the last run
    request_queue_size = 128  # a burst of clients must not overflow the listen backlog

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup of the host."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = str(host), int(port)
        self.setup_environ()

    @property
    def url(self) -> str:
        """Return its base URL, e.g. ``http://127.0.0.1:40123`` (no trailing slash)."""
        return f"http://{self.server_name}:{self.server_port}"


class _Answer(ServerHandler):
    """Answers one request; an application's ``DropConnection`` leaves it unanswered."""

    dropped = False

    def handle_error(self) -> None:
        """Send the usual 500, unless the application asked to drop the connection."""
        if isinstance(sys.exc_info()[1], DropConnection):
            self.dropped = True
            return
        super().handle_error()


class _Handler(WSGIRequestHandler):
    """Reads one request and hands it to the application; logs at debug level only."""

    timeout = 10.0  # a client that stops sending mid-request frees its thread

    def handle(self) -> None:
        """Serve one request as ``WSGIRequestHandler`` does, honouring ``DropConnection``."""
        self.raw_requestline = self.rfile.readline(65537)
        if len(self.raw_requestline) > 65536:
            self.send_error(414)
            return
        if not self.parse_request():
            return
        stdout = self.wfile  # typeshed types it BufferedIOBase; ServerHandler writes bytes
        answer = _Answer(self.rfile, stdout, self.get_stderr(), self.get_environ())  # type: ignore[arg-type]
        answer.request_handler = self  # type: ignore[attr-defined]
        answer.run(self.server.get_app())  # type: ignore[attr-defined]
        if answer.dropped:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def get_environ(self) -> dict[str, Any]:
        """The request's environ, with the request target as sent in ``REQUEST_URI``."""
        environ = super().get_environ()
        environ["REQUEST_URI"] = self.path
        return environ

    def log_message(self, format: str, *args: Any) -> None:
        """Log requests at debug level instead of printing them."""
        logger.debug("%s - " + format, self.address_string(), *args)


class ServingThread:
    """Serves ``server`` on a daemon thread until ``stop()`` (or the end of a ``with``)."""

    def __init__(
        self, server: socketserver.TCPServer, name: str, *, poll_interval: float = 0.05
    ) -> None:
        self._name = name
        self._poll_interval = poll_interval
        self.serve(server)

    def serve(self, server: socketserver.TCPServer) -> None:
        """Serve ``server`` on a new thread (again, after ``stop()``, with a new server)."""
        self._socket_server = server
        self.stopped = False
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": self._poll_interval},
            name=f"{self._name}-{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """Return the port it listens on."""
        return int(self._socket_server.server_address[1])

    def stop(self) -> None:
        """Stop accepting, wait for the serving thread and close the socket (idempotent)."""
        if self.stopped:
            return
        self.stopped = True
        self._socket_server.shutdown()
        self._thread.join()
        self._socket_server.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def status_line(code: int) -> str:
    """Return the WSGI status line of an HTTP status code: ``429 Too Many Requests``."""
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"{code} Unknown"


def bind_wsgi(
    application: WSGIApp,
    port: int,
    host: str,
    *,
    flag: str = "",
    wait_for_requests: bool = False,
) -> WsgiServer:
    """Claim ``host:port`` (0: any free port) for ``application`` without serving yet.

    ``flag`` names the setting to change when the port is taken (PortInUse).
    ``wait_for_requests`` makes stopping wait for the requests in flight.
    """
    try:
        server = WsgiServer((host, port), _Handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(host, port, flag) from None
        raise
    server.set_app(application)
    if wait_for_requests:
        server.daemon_threads = False
        server.block_on_close = True
    return server


def serve_wsgi(
    application: WSGIApp,
    port: int,
    host: str,
    *,
    name: str,
    flag: str = "",
    wait_for_requests: bool = False,
) -> ServingThread:
    """Serve ``application`` on ``port`` on a background thread, a thread per request
    (``flag`` names the setting to change when the port is taken)."""
    server = bind_wsgi(application, port, host, flag=flag, wait_for_requests=wait_for_requests)
    return ServingThread(server, name)


@contextmanager
def waitress_wsgi(
    application: WSGIApp, port: int, host: str, *, flag: str = "", path: str = "/"
) -> Iterator[None]:
    """Serve ``application`` with waitress on a background thread while the block runs; log
    ``listening`` with the URL of ``path`` on the port claimed (any free one for 0). On
    leaving, stop accepting and let the requests in flight finish, but not wait for idle
    keep-alive connections (a drain that follows must begin at once)."""
    from waitress.server import BaseWSGIServer, create_server

    try:
        server = create_server(
            application,
            host=host,
            port=port,
            threads=HTTP_THREADS,
            max_request_body_size=MAX_BODY_BYTES,
        )
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(host, port, flag) from None
        raise
    if not isinstance(server, BaseWSGIServer):  # one host and port: one socket
        raise TypeError(f"waitress built {type(server).__name__} for one socket")
    bound = int(server.getsockname()[1])  # port 0: the one the system picked
    threading.Thread(target=server.run, name=f"waitress-{bound}", daemon=True).start()
    logger.info("listening", extra={"action": f"http://{host}:{bound}{path}"})
    try:
        yield
    finally:
        # closed on the serving thread (the stubs type the trigger as an int); that thread
        # may linger on an idle keep-alive connection and ends with the process
        server.trigger.pull_trigger(server.close)  # type: ignore[attr-defined]
        server.task_dispatcher.shutdown()  # the requests in flight finish
