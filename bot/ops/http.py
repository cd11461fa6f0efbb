"""The operator's endpoints: ``/healthz``, ``/readyz`` and ``/metrics``, as WSGI.

``signoff serve`` answers them next to ``/slack/events``; ``signoff worker
--metrics-port`` answers them on a small server of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bot.app.request_hygiene import WSGIApp
from bot.app.serving import ServingThread, serve_wsgi
from bot.ops.health import Health, Report
from bot.ops.metrics import CONTENT_TYPE, Metrics

JSON = "application/json"


@dataclass(frozen=True, slots=True)
class Ops:
    """What the endpoints report on."""

    health: Health
    metrics: Metrics


def ops_app(ops: Ops, fallback: WSGIApp | None = None) -> WSGIApp:
    """A WSGI app answering the operator's endpoints and passing anything else on."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            return _report(ops.health.liveness(), start_response)
        if path == "/readyz":
            return _report(ops.health.readiness(), start_response)
        if path == "/metrics":
            return _reply(start_response, "200 OK", CONTENT_TYPE, ops.metrics.exposition())
        if fallback is not None:
            return fallback(environ, start_response)
        return _reply(start_response, "404 Not Found", "text/plain", b"not found\n")

    return application


def _report(report: Report, start_response: Callable[..., Any]) -> Iterable[bytes]:
    status = "200 OK" if report.ok else "503 Service Unavailable"
    return _reply(start_response, status, JSON, report.body())


def _reply(
    start_response: Callable[..., Any], status: str, content_type: str, body: bytes
) -> Iterable[bytes]:
    start_response(
        status,
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
        ],
    )
    return [body]


def serve_ops(ops: Ops, port: int, host: str = "0.0.0.0") -> ServingThread:  # noqa: S104
    """Answer the operator's endpoints on ``port`` on a background thread."""
    return serve_wsgi(ops_app(ops), port, host, name="signoff-ops", flag="--metrics-port")


@contextmanager
def ops_port(ops: Ops, port: int | None) -> Iterator[None]:
    """Answer the operator's endpoints on ``port``, if given, while the block runs."""
    if port is None:
        yield
        return
    with serve_ops(ops, port):
        yield
