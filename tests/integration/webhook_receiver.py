"""A webhook receiver on loopback that keeps what it was sent."""

from __future__ import annotations

import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bot.api.destinations import Destinations

LOOPBACK = "127.0.0.0/8"
"""Where the receiver listens: a network webhooks may reach only when allowed, as here."""
LOOPBACK_ALLOWED = Destinations((ipaddress.ip_network(LOOPBACK),))
"""Destinations that include the receiver's."""


class Receiver(ThreadingHTTPServer):
    """A webhook receiver that answers 503 to the first ``failures`` POSTs, then 200."""

    def __init__(self, failures: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.failures = failures
        self.received: list[tuple[int, dict[str, str], bytes]] = []
        self.lock = threading.Lock()

    def answered(self, status: int) -> list[tuple[int, dict[str, str], bytes]]:
        """Return the POSTs answered with ``status``."""
        with self.lock:
            return [r for r in self.received if r[0] == status]


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            status = 503 if len(self.server.received) < self.server.failures else 200
            self.server.received.append((status, dict(self.headers.items()), body))
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""
