"""An in-process receiver of ``response_url`` posts: what a person would be shown, per URL."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class ResponseUrls:
    """Hands out ``response_url``s on 127.0.0.1 and keeps what was posted to each."""

    def __init__(self) -> None:
        self._posts: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="response-urls", daemon=True
        )
        self._thread.start()

    def url(self, name: str) -> str:
        """Return the ``response_url`` called ``name``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/respond/{name}"

    def keep(self, name: str, body: dict[str, Any]) -> None:
        """Remember a post to ``name``."""
        with self._lock:
            self._posts.setdefault(name, []).append(body)

    def texts(self, name: str) -> list[str]:
        """Return the texts posted to ``name``, oldest first."""
        with self._lock:
            return [str(body.get("text", "")) for body in self._posts.get(name, [])]

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> ResponseUrls:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _handler_for(receiver: ResponseUrls) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            receiver.keep(self.path.rsplit("/", 1)[-1], json.loads(self.rfile.read(length)))
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            """Stay quiet."""

    return Handler
