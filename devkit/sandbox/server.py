"""The sandbox Slack Web API over HTTP: a ``ThreadingHTTPServer`` in a background thread."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import urlsplit

from slack_sdk import WebClient

from bot.app.serving import ServingThread
from bot.slack.scopes import BOT_SCOPES
from devkit.sandbox.web_api import DEFAULT_TOKEN, ApiResponse, SlackWebApi
from devkit.sandbox.workspace import Workspace

log = logging.getLogger(__name__)

API_PREFIX = "/api/"


class _ApiHttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # a burst of clients must not overflow the listen backlog

    def __init__(self, address: tuple[str, int], api: SlackWebApi) -> None:
        self.api = api
        super().__init__(address, _ApiRequestHandler)


class _ApiRequestHandler(BaseHTTPRequestHandler):
    """Serves ``/api/<method>``; everything else is a 404."""

    server_version = "SignoffSandboxSlack/1.0"

    def do_POST(self) -> None:
        """Answer a Web API call with a body."""
        self._serve()

    def do_GET(self) -> None:
        """Answer a Web API call with a query string."""
        self._serve()

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        if not parts.path.startswith(API_PREFIX) or len(parts.path) == len(API_PREFIX):
            self._send(ApiResponse(404, {"ok": False, "error": "not_found"}))
            return
        api = cast(_ApiHttpServer, self.server).api
        self._send(
            api.handle_http(
                parts.path[len(API_PREFIX) :],
                content_type=self.headers.get("Content-Type"),
                body=body,
                query=parts.query,
                authorization=self.headers.get("Authorization"),
            )
        )

    def _send(self, response: ApiResponse) -> None:
        data = json.dumps(response.body).encode("utf-8")
        self.send_response(response.status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Log requests at debug level instead of printing them to stderr."""
        log.debug("%s - " + format, self.address_string(), *args)


class RunningSlackApi(ServingThread):
    """A Slack Web API serving in a background thread; ``stop()`` (or ``with``) ends it."""

    def __init__(self, server: _ApiHttpServer, host: str, token: str) -> None:
        self._server = server
        self._host = host
        self._port = int(server.server_address[1])
        self.token = token
        super().__init__(server, "sandbox-slack-api")

    def go_offline(self) -> None:
        """Close the listening socket: every call is refused until ``go_online()``."""
        self.stop()

    def go_online(self) -> None:
        """Listen again, on the same port, serving the same API."""
        if not self.stopped:
            return
        self._server = _ApiHttpServer((self._host, self._port), self._server.api)
        self.serve(self._server)

    @property
    def url(self) -> str:
        """Return the server's base URL, e.g. ``http://127.0.0.1:8765`` (no trailing slash)."""
        return f"http://{self._host}:{self.port}"

    @property
    def api_url(self) -> str:
        """Return the ``base_url`` for ``WebClient``: ``<url>/api/`` (trailing slash needed)."""
        return self.url + API_PREFIX

    @property
    def api(self) -> SlackWebApi:
        """Return the transport-independent API it serves."""
        return self._server.api

    @property
    def workspace(self) -> Workspace:
        """Return the workspace it serves."""
        return self._server.api.workspace

    def client(self, **kwargs: Any) -> WebClient:
        """Return a ``slack_sdk.WebClient`` for this server (keyword arguments pass through)."""
        kwargs.setdefault("token", self.token)
        return WebClient(base_url=self.api_url, **kwargs)


def start_slack_api(
    workspace: Workspace | None = None,
    *,
    port: int = 0,
    token: str = DEFAULT_TOKEN,
    host: str = "127.0.0.1",
    scopes: Iterable[str] = BOT_SCOPES,
) -> RunningSlackApi:
    """Serve a workspace (a fresh one by default) as the Slack Web API in a background thread.

    Port 0 picks a free port. Requests must carry ``token`` (``Authorization: Bearer``), which
    was granted ``scopes``.
    """
    api = SlackWebApi(
        workspace if workspace is not None else Workspace(), tokens=(token,), scopes=scopes
    )
    return RunningSlackApi(_ApiHttpServer((host, port), api), host, token)
