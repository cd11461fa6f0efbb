"""The Slack app (Bolt, over ``bot.server.wsgi``) served on a loopback port in a thread."""

from __future__ import annotations

import logging
import socketserver
import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from bot.server import WSGIApp

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True

    def server_bind(self) -> None:
        """Bind without the reverse DNS lookup of the host."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = str(host), int(port)
        self.setup_environ()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Log requests at debug level instead of printing them."""
        logger.debug("%s - " + format, self.address_string(), *args)


class RunningApp:
    """A WSGI app serving in a background thread; ``stop()`` ends it."""

    def __init__(self, application: WSGIApp, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = make_server(host, port, application, server_class=_ThreadingWSGIServer,
                                   handler_class=_QuietHandler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True,
                                        name=f"signoff-dev-app-{self.port}")
        self._thread.start()

    @property
    def port(self) -> int:
        """Return the port it listens on."""
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        """Return its base URL, e.g. ``http://127.0.0.1:40123``."""
        return f"http://{self._server.server_name}:{self.port}"

    @property
    def request_url(self) -> str:
        """Return the Slack request URL: ``<url>/slack/events``."""
        return self.url + EVENTS_PATH

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()
