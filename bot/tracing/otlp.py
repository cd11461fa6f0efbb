"""Where a run's spans go: OTLP JSON lines (a file, stdout) or an OTLP/HTTP collector."""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

import requests
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from agent_runtime import SignoffError

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class TraceExportFailed(SignoffError):
    """A run's spans could not be written or were not accepted by the collector."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Return ``spans`` as an OTLP/JSON ExportTraceServiceRequest (hex ids, integer enums)."""
    document: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource in document.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            for span in scope.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return document


def _hex_ids(item: dict[str, Any]) -> None:
    """Turn the base64 ids of the protobuf JSON mapping into the hex OTLP/JSON requires."""
    for key in _ID_FIELDS:
        if key in item:
            item[key] = base64.b64decode(item[key]).hex()


class OtlpJsonLines(SpanExporter):
    """Writes each batch of spans as one line of OTLP JSON, as the Collector's file exporter.

    A failed export returns FAILURE and keeps the reason in ``failure``.
    """

    def __init__(self, out: TextIO, *, name: str = "the output") -> None:
        self._out = out
        self._name = name
        self.failure: TraceExportFailed | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write one line."""
        line = json.dumps(otlp_json(spans), ensure_ascii=False, separators=(",", ":"))
        try:
            self._out.write(line + "\n")
            self._out.flush()
        except OSError as exc:
            self.failure = TraceExportFailed(
                f"cannot write the trace to {self._name}: {exc.strerror or exc}", retryable=False
            )
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS


class OtlpHttp(SpanExporter):
    """Sends spans to an OTLP/HTTP traces endpoint with the SDK's ``OTLPSpanExporter``.

    A failed export returns FAILURE and keeps the reason, in words, in ``failure``; that
    names the endpoint as ``name`` (the URL unless given).
    """

    def __init__(self, url: str, *, timeout: float, name: str | None = None) -> None:
        self.url = url
        self.failure: TraceExportFailed | None = None
        self._name = name or url
        self._session = _RecordingSession()
        self._exporter: SpanExporter = OTLPSpanExporter(
            endpoint=url, timeout=timeout, session=self._session
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send one request, retrying transient failures within the timeout."""
        with _exporter_logs_held():
            result = self._exporter.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.failure = TraceExportFailed(
                f"could not send the trace to {self._name}: {self._session.failure}", retryable=True
            )
        return result

    def shutdown(self) -> None:
        """Close the connection pool."""
        with _exporter_logs_held():
            self._exporter.shutdown()


class _RecordingSession(requests.Session):
    """A requests session that remembers why its last request failed."""

    def __init__(self) -> None:
        super().__init__()
        self.failure = "the collector did not accept the spans"

    def request(
        self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any
    ) -> requests.Response:
        """Send a request, noting a failure in words."""
        try:
            response = super().request(method, url, *args, **kwargs)
        except requests.RequestException as exc:
            self.failure = _explain(exc)
            raise
        if not response.ok:
            self.failure = f"it answered HTTP {response.status_code} {response.reason}".strip()
        return response


def _explain(error: requests.RequestException) -> str:
    if isinstance(error, requests.exceptions.SSLError):
        return "the TLS handshake failed"
    if isinstance(error, requests.Timeout):
        return "it did not answer in time"
    if isinstance(error, requests.ConnectionError):
        return "cannot connect"
    return type(error).__name__


class _HeldLogs:
    """Keeps the OpenTelemetry SDK's own log lines off stderr while any export is under way.

    Exports may run on several threads at once: the first to start holds the SDK's logger,
    the last to finish gives it back as it was.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._propagate = True
        self._handler = logging.NullHandler()

    @contextmanager
    def __call__(self) -> Iterator[None]:
        """Hold the SDK's log lines for the duration of the ``with`` block."""
        logger = logging.getLogger("opentelemetry")
        with self._lock:
            if self._holders == 0:
                self._propagate = logger.propagate
                logger.addHandler(self._handler)
                logger.propagate = False
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0:
                    logger.removeHandler(self._handler)
                    logger.propagate = self._propagate


_exporter_logs_held = _HeldLogs()
"""The SDK's logger is one per process, and so is what holds it."""
