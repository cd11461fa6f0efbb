"""Live trace export: each journal entry sent as a span once committed, the run's at its end.

A ``SpanStreamer`` is the runtime's step observer. Told of an entry or an end, it only
queues it; a thread of its own reads what the span needs from the store (the entry's
failed attempts, the approval it records) and makes the span as ``signoff trace`` does,
and the SDK's ``BatchSpanProcessor`` sends the spans in batches from another thread. So
nothing here can hold up or fail a step: a full queue drops the span, and spans that
cannot be made or sent are dropped, logged once per run of failures without the
endpoint's credentials. ``close()`` sends what is left, giving up after a short grace, and
logs how long that took (``seconds``, in JSON logs), the wait a process's exit had on the
collector.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from agent_runtime import Approval, ApprovalNotFound, ApprovalStore, Run, StepRecord, Store
from bot.tracing.events import approval_id_of
from bot.tracing.otlp import OtlpHttp
from bot.tracing.spans import JournalSpans

logger = logging.getLogger(__name__)

EXPORT_TIMEOUT = timedelta(seconds=5)
"""How long one batch may take to send, retries included."""
FLUSH_GRACE = timedelta(seconds=2)
"""How long ``close()`` keeps retrying the last spans before it drops them."""
MAX_QUEUED = 2048
"""Entries and ends waiting for their spans to be made; more are dropped."""


@dataclass(frozen=True, slots=True)
class _Committed:
    run: Run
    step: StepRecord


@dataclass(frozen=True, slots=True)
class _Ended:
    run: Run


_Job = _Committed | _Ended | None  # None: stop


class SpanStreamer:
    """Streams the spans of what workers commit to an OTLP/HTTP traces endpoint."""

    def __init__(self, store: Store, approvals: ApprovalStore, exporter: SpanExporter) -> None:
        """Start the thread that makes spans; ``exporter`` gets them in batches."""
        self._store = store
        self._approvals = approvals
        self._exporter = _Reporting(exporter)
        self._spans = JournalSpans(BatchSpanProcessor(self._exporter))
        self._jobs: queue.Queue[_Job] = queue.Queue(MAX_QUEUED)
        self._queue_full = _Outage("trace queue full; dropping spans")
        self._making = _Outage("cannot make trace spans; dropping them")
        self._thread = threading.Thread(target=self._work, name="signoff-trace-stream", daemon=True)
        self._closed = False
        self._thread.start()

    @classmethod
    def to_endpoint(cls, url: str, store: Store, approvals: ApprovalStore) -> SpanStreamer:
        """Stream to the OTLP/HTTP traces endpoint ``url``."""
        return cls(
            store,
            approvals,
            OtlpHttp(url, timeout=EXPORT_TIMEOUT.total_seconds(), name=redacted(url)),
        )

    def step_committed(self, run: Run, step: StepRecord) -> None:
        """Queue the entry's span."""
        self._put(_Committed(run, step))

    def run_ended(self, run: Run) -> None:
        """Queue the run's span."""
        self._put(_Ended(run))

    def close(self) -> None:
        """Make the queued spans, send what is left and stop (within ``FLUSH_GRACE`` if the
        endpoint is down or slow to answer, up to ``EXPORT_TIMEOUT`` if it hangs)."""
        if self._closed:
            return
        self._closed = True
        started = time.monotonic()
        self._jobs.put(None)
        self._thread.join()
        give_up = threading.Timer(FLUSH_GRACE.total_seconds(), self._exporter.shutdown)
        give_up.daemon = True
        give_up.start()
        try:
            self._spans.shutdown()
        finally:
            give_up.cancel()
        seconds = round(time.monotonic() - started, 3)
        logger.info("trace stream closed", extra={"action": "close", "seconds": seconds})

    def _put(self, job: _Job) -> None:
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            self._queue_full.failed("the exporter falls behind")
        else:
            self._queue_full.ended()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                self._make(job)
            except Exception as exc:  # whatever it is, it must not end this thread
                self._making.failed(type(exc).__name__)
            else:
                self._making.ended()

    def _make(self, job: _Committed | _Ended) -> None:
        if isinstance(job, _Ended):
            self._spans.run_span(job.run)
            return
        run_id, step = job.run.id, job.step
        self._spans.step_span(
            run_id,
            step,
            attempts=self._store.list_attempts(run_id),
            approvals=self._approval_of(step),
        )

    def _approval_of(self, step: StepRecord) -> dict[str, Approval]:
        approval_id = approval_id_of(step)
        if approval_id is None:
            return {}
        try:
            return {approval_id: self._approvals.get_approval(approval_id)}
        except ApprovalNotFound:
            return {}


class _Reporting(SpanExporter):
    """Passes batches on to an exporter, logging the first failure of an outage only."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter
        self._outage = _Outage("trace export failed; dropping spans until it recovers")
        self._lock = threading.Lock()
        self._shut = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send one batch; a failure is logged (once per outage) and the batch dropped."""
        result = self._exporter.export(spans)
        if result is SpanExportResult.SUCCESS:
            self._outage.ended()
        else:
            failure = getattr(self._exporter, "failure", None)
            self._outage.failed(str(failure or "the spans were not accepted"), len(spans))
        return result

    def shutdown(self) -> None:
        """Shut the exporter down once (ending any retry it is waiting on)."""
        with self._lock:
            if self._shut:
                return
            self._shut = True
        self._exporter.shutdown()


class _Outage:
    """Logs the first failure of a run of failures, and the recovery after it with a count."""

    def __init__(self, message: str) -> None:
        self._message = message
        self._lock = threading.Lock()
        self._dropped: int | None = None

    def failed(self, reason: str, dropped: int = 1) -> None:
        """Note a failure; log it if it starts an outage."""
        with self._lock:
            starts = self._dropped is None
            self._dropped = (self._dropped or 0) + dropped
        if starts:
            logger.warning(self._message, extra={"action": reason})

    def ended(self) -> None:
        """Note a success; log the recovery if an outage was under way."""
        with self._lock:
            dropped, self._dropped = self._dropped, None
        if dropped is not None:
            logger.info("trace stream recovered", extra={"action": f"{dropped} spans dropped"})


def redacted(url: str) -> str:
    """Return ``url`` without credentials, query or fragment: fit for a log line."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
