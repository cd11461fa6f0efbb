"""An in-process OTLP/HTTP trace collector: ``POST /v1/traces`` decoded and kept for asserts."""

from __future__ import annotations

import gzip
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

TRACES_PATH = "/v1/traces"


class OtlpCollector:
    """A collector on 127.0.0.1 (a free port); stopped on exit from its ``with`` block."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.encodings: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="otlp-collector", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The traces endpoint."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{TRACES_PATH}"

    def keep(self, request: ExportTraceServiceRequest, encoding: str) -> None:
        """Remember a decoded export request and how its body was encoded."""
        with self._lock:
            self.requests.append(request)
            self.encodings.append(encoding)

    def spans(self) -> list[Span]:
        """Every span received, in the order received."""
        with self._lock:
            return [
                span
                for request in self.requests
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> OtlpCollector:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def decode_body(body: bytes, encoding: str) -> bytes:
    """Undo the request's Content-Encoding (none, gzip or deflate)."""
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


def _handler_for(collector: OtlpCollector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        """Accepts OTLP/HTTP protobuf trace exports."""

        def do_POST(self) -> None:
            """Decode and keep an export request; answer an empty ExportTraceServiceResponse."""
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != TRACES_PATH:
                self._answer(404, b"")
                return
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            request = ExportTraceServiceRequest()
            request.ParseFromString(decode_body(body, encoding))
            collector.keep(request, encoding)
            self._answer(200, ExportTraceServiceResponse().SerializeToString())

        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Keep the test output quiet."""

    return Handler
