"""The Slack app (Bolt, over ``bot.app.server.wsgi``) served on a loopback port in a thread."""

from __future__ import annotations

import logging
import socketserver
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from bot.app.request_hygiene import WSGIApp
from bot.app.serving import ServingThread

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


class RunningApp(ServingThread):
    """A WSGI app serving in a background thread; ``stop()`` ends it."""

    def __init__(self, application: WSGIApp, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = make_server(
            host, port, application, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler
        )
        super().__init__(self._server, "signoff-dev-app", poll_interval=0.1)

    @property
    def url(self) -> str:
        """Return its base URL, e.g. ``http://127.0.0.1:40123``."""
        return f"http://{self._server.server_name}:{self.port}"

    @property
    def request_url(self) -> str:
        """Return the Slack request URL: ``<url>/slack/events``."""
        return self.url + EVENTS_PATH
