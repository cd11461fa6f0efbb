"""The sandbox web server: the page, its API, the Slack Web API and ``response_url``s.

One loopback HTTP server answers:

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
import socketserver
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from bot.app.serving import ServingThread
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


class SandboxServer(ThreadingHTTPServer):
    """A threading HTTP server for the sandbox; routes are attached by ``start()``."""

    daemon_threads = True
    allow_reuse_address = True  # a restart must not wait out the TIME_WAIT of the last run
    request_queue_size = 64

    def __init__(self, address: tuple[str, int]) -> None:
        self.api: SlackWebApi | None = None
        self.ui: SandboxUi | None = None
        self._serving: ServingThread | None = None
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup of the host."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = str(host), int(port)

    @property
    def url(self) -> str:
        """Return the page's URL, e.g. ``http://127.0.0.1:3000/``."""
        return f"http://{self.server_name}:{self.server_port}/"

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
        self._serving = ServingThread(self, "sandbox-web", poll_interval=0.1)

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._serving is not None:
            self._serving.stop()
            self._serving = None
        else:
            self.server_close()


def bind_sandbox(port: int, host: str = "127.0.0.1") -> SandboxServer:
    """Claim ``host:port`` for the sandbox (0: any free port); PortTaken if it is in use."""
    try:
        return SandboxServer((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortTaken(errno.EADDRINUSE, f"port {port} on {host} is already in use") from None
        raise


class _Handler(BaseHTTPRequestHandler):
    server: SandboxServer
    server_version = "SignoffSandbox/1.0"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        """Serve the page, static files, the page's API and GET Web API calls."""
        self._route("GET")

    def do_POST(self) -> None:
        """Serve the Web API, the page's actions and response URLs."""
        self._route("POST")

    def _route(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = parts.path
        body = self._body()
        if body is None:
            self._json(413, {"ok": False, "error": "request_too_large"})
            return
        if path.startswith(API_PREFIX) and self.server.api is not None:
            self._api(path[len(API_PREFIX) :], parts.query, body)
            return
        if not self._trusted_host():
            self._json(403, {"ok": False, "error": "forbidden_host"})
            return
        if method == "POST" and path.startswith(RESPONSE_PREFIX):
            self._respond(path[len(RESPONSE_PREFIX) :], body)
        elif method == "GET" and (path == "/" or path.startswith("/static/")):
            self._static("index.html" if path == "/" else path.removeprefix("/static/"))
        elif path.startswith("/ui/") and self.server.ui is not None:
            self._ui(method, path.removeprefix("/ui/"), dict(parse_qsl(parts.query)), body)
        else:
            self._json(404, {"ok": False, "error": "not_found"})

    def _api(self, method: str, query: str, body: bytes) -> None:
        assert self.server.api is not None
        response: ApiResponse = self.server.api.handle_http(
            method,
            content_type=self.headers.get("Content-Type"),
            body=body,
            query=query,
            authorization=self.headers.get("Authorization"),
        )
        self._json(response.status, response.body, response.headers)

    def _respond(self, token: str, body: bytes) -> None:
        assert self.server.ui is not None
        try:
            decoded = json.loads(body.decode("utf-8")) if body else {}
        except (UnicodeDecodeError, ValueError):
            self._json(400, {"ok": False, "error": "invalid_json"})
            return
        if not isinstance(decoded, dict):
            self._json(400, {"ok": False, "error": "invalid_json"})
            return
        status, answer = self.server.ui.link.respond(token, decoded)
        self._json(status, answer)

    def _ui(self, method: str, name: str, query: dict[str, str], body: bytes) -> None:
        ui = self.server.ui
        assert ui is not None
        if method == "POST" and not self._same_origin_json():
            self._json(403, {"ok": False, "error": "json_from_this_page_only"})
            return
        decoded = _json_object(body) if method == "POST" else {}
        if decoded is None:
            self._json(400, {"ok": False, "error": "invalid_json"})
            return
        try:
            answer = self._ui_answer(ui, method, name, query, decoded)
        except WorkspaceError as exc:
            answer = 400, {"ok": False, "error": exc.error}
        except Exception:
            log.exception("sandbox page request failed: %s %s", method, name)
            answer = 500, {"ok": False, "error": "internal_error"}
        self._json(*answer)

    def _ui_answer(
        self, ui: SandboxUi, method: str, name: str, query: dict[str, str], body: dict[str, Any]
    ) -> Answer:
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

    def _static(self, name: str) -> None:
        suffix = name[name.rfind(".") :] if "." in name else ""
        if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
            self._json(404, {"ok": False, "error": "not_found"})
            return
        resource = resources.files("devkit.sandbox").joinpath("static", name)
        if not resource.is_file():
            self._json(404, {"ok": False, "error": "not_found"})
            return
        data = resource.read_bytes()
        headers = {"Content-Security-Policy": CSP} if suffix == ".html" else {}
        self._send(200, data, STATIC_TYPES[suffix], headers)

    def _trusted_host(self) -> bool:
        """Refuse other host names (DNS rebinding): only loopback names, on our port."""
        host = (self.headers.get("Host") or "").lower()
        port = self.server.server_port
        return host in {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}

    def _same_origin_json(self) -> bool:
        """Accept actions only as JSON from this page (a cross-site form cannot send JSON)."""
        media = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        origin = self.headers.get("Origin")
        host = self.headers.get("Host") or ""
        return media == "application/json" and (origin is None or origin == f"http://{host}")

    def _body(self) -> bytes | None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return None
        if length < 0 or length > MAX_BODY:
            return None
        return self.rfile.read(length) if length else b""

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self._send(status, data, "application/json; charset=utf-8", headers or {})

    def _send(self, status: int, data: bytes, content_type: str, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        """Log requests at debug level instead of printing them."""
        log.debug("%s - " + format, self.address_string(), *args)


def _json_object(body: bytes) -> dict[str, Any] | None:
    if not body:
        return {}
    try:
        decoded = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return decoded if isinstance(decoded, dict) else None
