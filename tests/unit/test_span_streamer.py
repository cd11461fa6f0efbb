"""The span streamer on the shipped fakes: the spans of ``run_spans``, outages logged once."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_runtime import RetryPolicy, RunContext, RunId, RunStatus, Runtime, Workflows
from agent_runtime.testing import FrozenClock, InMemoryApprovalStore, InMemoryStore
from bot.tracing import RunJournal, SpanStreamer, run_spans
from bot.tracing.stream import redacted

FAST = RetryPolicy(max_attempts=3, initial_interval=timedelta(0))


class Collector(SpanExporter):
    """Keeps what it is sent; refuses the first ``refuse`` batches, naming a reason."""

    def __init__(self, refuse: int = 0) -> None:
        self.refuse = refuse
        self.batches: list[tuple[ReadableSpan, ...]] = []
        self.failure = "it answered HTTP 503 Service Unavailable"

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Keep the batch, or refuse it while refusals are left."""
        if self.refuse:
            self.refuse -= 1
            return SpanExportResult.FAILURE
        self.batches.append(tuple(spans))
        return SpanExportResult.SUCCESS


def _run(exporter: SpanExporter) -> tuple[InMemoryStore, RunId]:
    """Run a workflow whose step fails once, streaming to ``exporter``; close the stream."""
    store = InMemoryStore()
    workflows = Workflows()
    failures = iter([ConnectionError("ledger unreachable")])

    def flaky() -> str:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return "ok"

    def flow(ctx: RunContext, _: Any) -> str:
        ctx.now()
        return str(ctx.step(flaky, name="lookup", retry=FAST))

    workflows.add("flow", flow)
    streamer = SpanStreamer(store, InMemoryApprovalStore(store), exporter)
    runtime = Runtime(store, workflows, clock=FrozenClock(), observer=streamer)
    run = runtime.start("flow")
    runtime.worker().run_once()
    streamer.close()
    assert store.get_run(run.id).status == RunStatus.COMPLETED
    return store, run.id


def test_streamed_spans_are_the_spans_of_the_whole_journal() -> None:
    """Each entry's span and the run's, sent one by one, equal ``run_spans`` of the journal."""
    memory = InMemorySpanExporter()
    store, run_id = _run(memory)
    journal = RunJournal(
        run=store.get_run(run_id),
        steps=store.load_journal(run_id),
        attempts=store.list_attempts(run_id),
    )
    streamed = {
        span.context.span_id: span.to_json()
        for span in memory.get_finished_spans()
        if span.context is not None
    }
    exported = {
        span.context.span_id: span.to_json()
        for span in run_spans(journal)
        if span.context is not None
    }
    assert streamed == exported
    assert len(streamed) == len(journal.steps) + 1


def test_an_outage_is_logged_once_and_its_end_once(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two refused batches give one warning with the reason, then one note of the recovery."""
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1")
    collector = Collector(refuse=2)
    with caplog.at_level(logging.INFO, logger="bot.tracing.stream"):
        _run(collector)
    notes = [
        (r.levelno, r.getMessage(), getattr(r, "action", ""))
        for r in caplog.records
        if r.name == "bot.tracing.stream"
    ]
    assert notes == [
        (
            logging.WARNING,
            "trace export failed; dropping spans until it recovers",
            collector.failure,
        ),
        (logging.INFO, "trace stream recovered", "2 spans dropped"),
        (logging.INFO, "trace stream closed", "close"),
    ]
    assert len(collector.batches) == 1


def test_closing_logs_how_long_sending_what_was_left_took(caplog: pytest.LogCaptureFixture) -> None:
    """``close()`` logs once, with the seconds it waited for the collector as a field."""
    with caplog.at_level(logging.INFO, logger="bot.tracing.stream"):
        _run(Collector())
    (closed,) = [r for r in caplog.records if r.getMessage() == "trace stream closed"]
    seconds = getattr(closed, "seconds", None)
    assert isinstance(seconds, float)
    assert seconds >= 0


def test_an_endpoint_is_logged_without_its_credentials() -> None:
    """User, password, query and fragment are left out of the endpoint named in logs."""
    assert (
        redacted("https://u:p@collector.example:4318/v1/traces?key=k#f")
        == "https://collector.example:4318/v1/traces"
    )
