"""The operator's endpoints: ``/healthz``, ``/readyz`` and ``/metrics``, as WSGI.

``signoff serve`` answers them next to ``/slack/events``; ``signoff worker
--metrics-port`` answers them on a small server of its own. Either listener is up before the
database is reached: it serves a ``Front``, which answers for the starting process (its
``Startup`` is the health it reports) until the process is up, then passes to its own app.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from bot.app.request_hygiene import WSGIApp
from bot.app.serving import serve_wsgi
from bot.ops.health import Report
from bot.ops.metrics import CONTENT_TYPE, Metrics

logger = logging.getLogger(__name__)

JSON = "application/json"


class Probes(Protocol):
    """What ``/healthz`` and ``/readyz`` report: ``Health`` once the process is up, its
    ``Startup`` before."""

    def liveness(self) -> Report:
        """Tell whether the process is alive, and if not why."""
        ...

    def readiness(self) -> Report:
        """Tell whether the process can serve, and if not why."""
        ...


@dataclass(frozen=True, slots=True)
class Ops:
    """What the endpoints report on."""

    health: Probes
    metrics: Metrics


class Front:
    """The WSGI app of a listener opened before the process is up: ``starting`` answers
    until ``up`` hands over the process's own app, on the same listener."""

    def __init__(self, starting: WSGIApp) -> None:
        self._application = starting

    def up(self, application: WSGIApp) -> None:
        """Answer every request from now on with ``application``."""
        self._application = application

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        return self._application(environ, start_response)


def ops_app(ops: Ops, fallback: WSGIApp | None = None) -> WSGIApp:
    """A WSGI app answering the operator's endpoints and passing anything else on."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            return _report(ops.health.liveness(), start_response)
        if path == "/readyz":
            return _report(ops.health.readiness(), start_response)
        if path == "/metrics":
            return reply(start_response, "200 OK", CONTENT_TYPE, ops.metrics.exposition())
        if fallback is not None:
            return fallback(environ, start_response)
        return reply(start_response, "404 Not Found", "text/plain", b"not found\n")

    return application


def _report(report: Report, start_response: Callable[..., Any]) -> Iterable[bytes]:
    status = "200 OK" if report.ok else "503 Service Unavailable"
    return reply(start_response, status, JSON, report.body())


def reply(
    start_response: Callable[..., Any],
    status: str,
    content_type: str,
    body: bytes,
    headers: tuple[tuple[str, str], ...] = (),
) -> Iterable[bytes]:
    """Answer with ``body``, never cached, with ``headers`` besides."""
    start_response(
        status,
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            *headers,
        ],
    )
    return [body]


@contextmanager
def ops_port(application: WSGIApp, port: int | None) -> Iterator[None]:
    """Answer the operator's endpoints (``application``: an ``ops_app`` or a ``Front`` over
    one) on ``port`` (0: any free one, logged), if given, while the block runs."""
    if port is None:
        yield
        return
    host = "0.0.0.0"  # noqa: S104
    with serve_wsgi(application, port, host, name="signoff-ops", flag="--metrics-port") as served:
        logger.info(
            "operator endpoints listening", extra={"action": f"http://{host}:{served.port}/"}
        )
        yield
