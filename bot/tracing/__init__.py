"""A run's journal exported as OpenTelemetry spans: afterwards (``signoff trace``) or live."""

from bot.tracing.ids import JournalIds, span_id_for, trace_id_for
from bot.tracing.otlp import OtlpHttp, OtlpJsonLines, TraceExportFailed, otlp_json
from bot.tracing.spans import SERVICE_NAME, JournalSpans, RunJournal, export_run, run_spans
from bot.tracing.stream import SpanStreamer

__all__ = [
    "SERVICE_NAME",
    "JournalIds",
    "JournalSpans",
    "OtlpHttp",
    "OtlpJsonLines",
    "RunJournal",
    "SpanStreamer",
    "TraceExportFailed",
    "export_run",
    "otlp_json",
    "run_spans",
    "span_id_for",
    "trace_id_for",
]
