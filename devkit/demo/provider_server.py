"""The demo payment provider over HTTP: a WSGI app on loopback, threaded or foreground.

``start_in_thread`` returns a ``RunningProvider`` (tests, the dev loop); ``serve`` runs one
until SIGTERM, Ctrl-C or a stop event (the ``demo provider`` command).
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, Final

from bot.app.request_hygiene import WSGIApp
from bot.app.serving import PortInUse as ServingPortInUse
from bot.app.serving import ServingThread, WsgiServer, bind_wsgi, status_line
from devkit.demo.errors import PortInUse, ProviderError
from devkit.demo.ledger import Ledger
from devkit.demo.provider import MAX_BODY_BYTES, Provider, Reply, error_body
from devkit.demo.records import DEMO_ORDERS, Order

DEFAULT_HOST: Final = "127.0.0.1"

Log = Callable[[str], None]


def provider_app(provider: Provider, log: Log | None = None) -> WSGIApp:
    """A WSGI app answering every request from ``provider`` (``log``: a line per request)."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        target = _target(environ)
        key = environ.get("HTTP_IDEMPOTENCY_KEY")
        try:
            reply = provider.handle(method, target, key, _read_body(environ))
        except Exception as exc:
            reply = Reply(500, error_body("internal_error", f"{type(exc).__name__}: {exc}"))
        if log is not None:
            made = f" created {reply.created_charge}" if reply.created_charge else ""
            log(f"{method} {target} key={key or '-'} -> {reply.status}{made}")
        if reply.created_charge:
            provider.pause_if_armed(reply.created_charge)
        payload = json.dumps(reply.body, ensure_ascii=False).encode("utf-8")
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        start_response(status_line(reply.status), [*headers, *reply.headers])
        return [payload]

    return application


def _target(environ: dict[str, Any]) -> str:
    """Return the request target as sent: its path and query string."""
    if "REQUEST_URI" in environ:
        return str(environ["REQUEST_URI"])
    query = environ.get("QUERY_STRING", "")
    return str(environ.get("PATH_INFO", "/")) + (f"?{query}" if query else "")


def _read_body(environ: dict[str, Any]) -> bytes | None:
    header = environ.get("CONTENT_LENGTH")
    if not header:
        return b""
    try:
        length = int(header)
    except ValueError:
        return None
    if not 0 <= length <= MAX_BODY_BYTES:
        return None
    body: bytes = environ["wsgi.input"].read(length)
    return body


class RunningProvider(ServingThread):
    """A provider serving in a background thread; ``stop()`` (or the ``with`` block) ends it."""

    def __init__(self, server: WsgiServer, provider: Provider) -> None:
        self._server = server
        self._provider = provider
        super().__init__(server, "demo-provider")

    @property
    def url(self) -> str:
        """Return its base URL, e.g. ``http://127.0.0.1:8765``."""
        return self._server.url

    @property
    def ledger(self) -> Ledger:
        """Return the ledger it writes."""
        return self._provider.ledger

    def stop(self) -> None:
        """End pauses, stop accepting, wait for requests in flight, close the ledger."""
        if self.stopped:
            return
        self._provider.release()
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
        server = bind_wsgi(provider_app(provider, log), port, host, wait_for_requests=True)
    except ServingPortInUse:
        ledger.close()
        raise PortInUse(
            f"port {port} on {host} is already in use (is another demo provider running?)"
        ) from None
    except OSError as exc:
        ledger.close()
        raise ProviderError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return RunningProvider(server, provider)


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
