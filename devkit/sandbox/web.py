"""The sandbox web server: the page, its API, the Slack Web API and ``response_url``s.

One loopback WSGI app (served by ``bot.app.serving``) answers:

- ``/`` and ``/static/*``: the page (plain HTML, CSS and JavaScript, nothing from elsewhere);
- ``/api/<method>``: the Slack Web API the app's ``slack_sdk`` client calls (bearer token);
- ``/ui/*``: the page's own API (``devkit.sandbox.ui_api``): JSON, same origin only;
- ``/slack/response/<token>``: the ``response_url``s handed to the app.

``bind_sandbox()`` claims the port first, so a caller can refuse early when it is taken, and
``SandboxServer.start()`` serves once the rest is wired.
"""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl

from bot.app.serving import PortInUse, ServingThread, bind_wsgi, status_line
from devkit.sandbox.records import WorkspaceError
from devkit.sandbox.server import API_PREFIX
from devkit.sandbox.ui_api import Answer, SandboxUi
from devkit.sandbox.web_api import ApiResponse, SlackWebApi

log = logging.getLogger(__name__)

RESPONSE_PREFIX = "/slack/response/"
MAX_BODY = 1_000_000
STATIC_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
UI_ACTIONS = ("command", "message", "home", "click", "submit", "close")


class PortTaken(OSError):
    """The sandbox's port is already in use."""


class SandboxServer:
    """The sandbox's WSGI app on its claimed port; routes are attached by ``start()``."""

    def __init__(self, host: str, port: int) -> None:
        self.api: SlackWebApi | None = None
        self.ui: SandboxUi | None = None
        self._serving: ServingThread | None = None
        self._server = bind_wsgi(self._application, port, host)
        self.server_port = self._server.server_port

    @property
    def url(self) -> str:
        """Return the page's URL, e.g. ``http://127.0.0.1:3000/``."""
        return self._server.url + "/"

    @property
    def api_url(self) -> str:
        """Return the Web API base URL for ``slack_sdk``: ``<url>api/``."""
        return self.url.rstrip("/") + API_PREFIX

    @property
    def response_url_base(self) -> str:
        """Return the prefix of the ``response_url``s handed to the app."""
        return self.url.rstrip("/") + RESPONSE_PREFIX

    def start(self, api: SlackWebApi, ui: SandboxUi) -> None:
        """Serve ``api`` and ``ui`` in a background thread."""
        self.api, self.ui = api, ui
        self._serving = ServingThread(self._server, "sandbox-web", poll_interval=0.1)

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._serving is not None:
            self._serving.stop()
            self._serving = None
        else:
            self._server.server_close()

    def _application(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> list[bytes]:
        reply = _Request(self, environ).route()
        start_response(status_line(reply.status), reply.headers)
        return [reply.data]


def bind_sandbox(port: int, host: str = "127.0.0.1") -> SandboxServer:
    """Claim ``host:port`` for the sandbox (0: any free port); PortTaken if it is in use."""
    try:
        return SandboxServer(host, port)
    except PortInUse:
        raise PortTaken(errno.EADDRINUSE, f"port {port} on {host} is already in use") from None


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    data: bytes
    headers: list[tuple[str, str]]


class _Request:
    """One request to the sandbox, routed to the page, its API, the Web API or a response URL."""

    def __init__(self, server: SandboxServer, environ: dict[str, Any]) -> None:
        self.server = server
        self.environ = environ
        self.method = environ.get("REQUEST_METHOD", "GET")

    def header(self, name: str) -> str | None:
        """Return a request header (``Content-Type``, ``Host``, …), if sent."""
        key = name.upper().replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = "HTTP_" + key
        value = self.environ.get(key)
        return str(value) if value else None

    def route(self) -> _Reply:
        """Answer the request."""
        if self.method not in ("GET", "POST"):
            return self._json(501, {"ok": False, "error": "unsupported_method"})
        path = self.environ.get("PATH_INFO", "")
        query = self.environ.get("QUERY_STRING", "")
        body = self._body()
        if body is None:
            return self._json(413, {"ok": False, "error": "request_too_large"})
        if path.startswith(API_PREFIX) and self.server.api is not None:
            return self._api(path[len(API_PREFIX) :], query, body)
        if not self._trusted_host():
            return self._json(403, {"ok": False, "error": "forbidden_host"})
        if self.method == "POST" and path.startswith(RESPONSE_PREFIX):
            return self._respond(path[len(RESPONSE_PREFIX) :], body)
        if self.method == "GET" and (path == "/" or path.startswith("/static/")):
            return self._static("index.html" if path == "/" else path.removeprefix("/static/"))
        if path.startswith("/ui/") and self.server.ui is not None:
            return self._ui(path.removeprefix("/ui/"), dict(parse_qsl(query)), body)
        return self._json(404, {"ok": False, "error": "not_found"})

    def _api(self, method: str, query: str, body: bytes) -> _Reply:
        assert self.server.api is not None
        response: ApiResponse = self.server.api.handle_http(
            method,
            content_type=self.header("Content-Type"),
            body=body,
            query=query,
            authorization=self.header("Authorization"),
        )
        return self._json(response.status, response.body, response.headers)

    def _respond(self, token: str, body: bytes) -> _Reply:
        assert self.server.ui is not None
        try:
            decoded = json.loads(body.decode("utf-8")) if body else {}
        except (UnicodeDecodeError, ValueError):
            return self._json(400, {"ok": False, "error": "invalid_json"})
        if not isinstance(decoded, dict):
            return self._json(400, {"ok": False, "error": "invalid_json"})
        status, answer = self.server.ui.link.respond(token, decoded)
        return self._json(status, answer)

    def _ui(self, name: str, query: dict[str, str], body: bytes) -> _Reply:
        ui = self.server.ui
        assert ui is not None
        if self.method == "POST" and not self._same_origin_json():
            return self._json(403, {"ok": False, "error": "json_from_this_page_only"})
        decoded = _json_object(body) if self.method == "POST" else {}
        if decoded is None:
            return self._json(400, {"ok": False, "error": "invalid_json"})
        try:
            answer = self._ui_answer(ui, name, query, decoded)
        except WorkspaceError as exc:
            answer = 400, {"ok": False, "error": exc.error}
        except Exception:
            log.exception("sandbox page request failed: %s %s", self.method, name)
            answer = 500, {"ok": False, "error": "internal_error"}
        return self._json(*answer)

    def _ui_answer(
        self, ui: SandboxUi, name: str, query: dict[str, str], body: dict[str, Any]
    ) -> Answer:
        method = self.method
        if method == "GET" and name == "bootstrap":
            return 200, ui.bootstrap()
        if method == "GET" and name == "state":
            return 200, ui.state(query)
        if method == "GET" and name == "events":
            return 200, ui.changes(query)
        if method == "GET" and name == "panel" and ui.panel is not None:
            return 200, ui.panel.state(query)
        if method == "POST" and name.startswith("panel/") and ui.panel is not None:
            return 200, ui.panel.act(name.removeprefix("panel/"), body)
        if method == "POST" and name in UI_ACTIONS:
            return ui.act(name, body)
        return 404, {"ok": False, "error": "not_found"}

    def _static(self, name: str) -> _Reply:
        suffix = name[name.rfind(".") :] if "." in name else ""
        if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
            return self._json(404, {"ok": False, "error": "not_found"})
        resource = resources.files("devkit.sandbox").joinpath("static", name)
        if not resource.is_file():
            return self._json(404, {"ok": False, "error": "not_found"})
        data = resource.read_bytes()
        headers = {"Content-Security-Policy": CSP} if suffix == ".html" else {}
        return _reply(200, data, STATIC_TYPES[suffix], headers)

    def _trusted_host(self) -> bool:
        """Refuse other host names (DNS rebinding): only loopback names, on our port."""
        host = (self.header("Host") or "").lower()
        port = self.server.server_port
        return host in {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}

    def _same_origin_json(self) -> bool:
        """Accept actions only as JSON from this page (a cross-site form cannot send JSON)."""
        media = (self.header("Content-Type") or "").split(";")[0].strip().lower()
        origin = self.header("Origin")
        host = self.header("Host") or ""
        return media == "application/json" and (origin is None or origin == f"http://{host}")

    def _body(self) -> bytes | None:
        try:
            length = int(self.environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return None
        if length < 0 or length > MAX_BODY:
            return None
        return self.environ["wsgi.input"].read(length) if length else b""

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> _Reply:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return _reply(status, data, "application/json; charset=utf-8", headers or {})


def _reply(status: int, data: bytes, content_type: str, headers: dict[str, str]) -> _Reply:
    return _Reply(
        status,
        data,
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(data))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            *headers.items(),
        ],
    )


def _json_object(body: bytes) -> dict[str, Any] | None:
    if not body:
        return {}
    try:
        decoded = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return decoded if isinstance(decoded, dict) else None
