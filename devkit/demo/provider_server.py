"""The demo payment provider over HTTP: a threading server on loopback, threaded or foreground.

``start_in_thread`` returns a ``RunningProvider`` (tests, the dev loop); ``serve`` runs one
until SIGTERM, Ctrl-C or a stop event (the ``demo provider`` command).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socketserver
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from bot.app.serving import ServingThread
from devkit.demo.errors import PortInUse, ProviderError
from devkit.demo.ledger import Ledger
from devkit.demo.provider import MAX_BODY_BYTES, Provider, Reply, error_body
from devkit.demo.records import DEMO_ORDERS, Order

DEFAULT_HOST: Final = "127.0.0.1"

Log = Callable[[str], None]


class _Server(ThreadingHTTPServer):
    """Threading server that joins its request threads on close and skips the DNS lookup."""

    daemon_threads = False
    block_on_close = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], provider: Provider, log: Log | None) -> None:
        self.provider = provider
        self.log = log
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup of the host."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = str(host), int(port)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10.0
    server_version = "SignoffDemoProvider/1"

    def do_GET(self) -> None:
        """Serve a GET."""
        self._serve()

    def do_POST(self) -> None:
        """Serve a POST."""
        self._serve()

    def do_PUT(self) -> None:
        """Answer 405 (recorded)."""
        self._serve()

    def do_PATCH(self) -> None:
        """Answer 405 (recorded)."""
        self._serve()

    def do_DELETE(self) -> None:
        """Answer 405 (recorded)."""
        self._serve()

    def _serve(self) -> None:
        provider = self.server.provider
        key = self.headers.get("Idempotency-Key")
        try:
            reply = provider.handle(self.command, self.path, key, self._read_body())
        except Exception as exc:
            reply = Reply(500, error_body("internal_error", f"{type(exc).__name__}: {exc}"))
        if self.server.log is not None:
            made = f" created {reply.created_charge}" if reply.created_charge else ""
            self.server.log(f"{self.command} {self.path} key={key or '-'} -> {reply.status}{made}")
        if reply.created_charge:
            provider.pause_if_armed(reply.created_charge)
        self._send(reply)

    def _read_body(self) -> bytes | None:
        header = self.headers.get("Content-Length")
        if not header:
            return b""
        try:
            length = int(header)
        except ValueError:
            return None
        if not 0 <= length <= MAX_BODY_BYTES:
            return None
        return self.rfile.read(length)

    def _send(self, reply: Reply) -> None:
        payload = json.dumps(reply.body, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Stay quiet: ``_serve`` logs each request itself."""

    def log_message(self, format: str, *args: Any) -> None:
        """Send the server's own complaints (bad request lines, timeouts) to the log."""
        if self.server.log is not None:
            self.server.log(f"{self.address_string()} {format % args}")


class RunningProvider(ServingThread):
    """A provider serving in a background thread; ``stop()`` (or the ``with`` block) ends it."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        super().__init__(server, "demo-provider")

    @property
    def url(self) -> str:
        """Return its base URL, e.g. ``http://127.0.0.1:8765``."""
        return f"http://{self._server.server_name}:{self.port}"

    @property
    def ledger(self) -> Ledger:
        """Return the ledger it writes."""
        return self._server.provider.ledger

    def stop(self) -> None:
        """End pauses, stop accepting, wait for requests in flight, close the ledger."""
        if self.stopped:
            return
        self._server.provider.release()
        super().stop()
        self.ledger.close()


def start_in_thread(
    ledger_path: str | os.PathLike[str],
    *,
    port: int = 0,
    host: str = DEFAULT_HOST,
    pause_after_charge_file: str | os.PathLike[str] | None = None,
    orders: Mapping[str, Order] = DEMO_ORDERS,
    log: Log | None = None,
) -> RunningProvider:
    """Start a provider in a background thread (port 0: any free port) and return it.

    Raises PortInUse if the port is taken and LedgerError if the ledger cannot be opened.
    """
    ledger = Ledger(ledger_path)
    provider = Provider(ledger, orders=orders, pause_after_charge_file=pause_after_charge_file)
    try:
        server = _Server((host, port), provider, log)
    except OSError as exc:
        ledger.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"port {port} on {host} is already in use (is another demo provider running?)"
            ) from None
        raise ProviderError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return RunningProvider(server)


def serve(
    port: int,
    ledger_path: str | os.PathLike[str],
    *,
    host: str = DEFAULT_HOST,
    pause_after_charge_file: str | os.PathLike[str] | None = None,
    log: Log | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve until SIGTERM, Ctrl-C or ``stop`` is set, then stop cleanly.

    Signals are handled only when called from the main thread. ``log`` receives a line when
    the provider is listening and one per request.
    """
    if stop is None:
        stop = threading.Event()
    running = start_in_thread(
        ledger_path, port=port, host=host, pause_after_charge_file=pause_after_charge_file, log=log
    )
    if log is not None:
        log(f"demo provider listening on {running.url} (ledger {running.ledger.path})")
    try:
        with _stop_on_signals(stop):
            while not stop.wait(0.2):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    for signum in previous:
        signal.signal(signum, lambda *_: stop.set())
    try:
        yield
    finally:
        for signum, handler in previous.items():
            with suppress(TypeError, ValueError):
                signal.signal(signum, handler)
