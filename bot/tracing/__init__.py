"""A run's journal exported as OpenTelemetry spans (``signoff trace``)."""

from bot.tracing.ids import JournalIds, span_id_for, trace_id_for
from bot.tracing.otlp import OtlpHttp, OtlpJsonLines, TraceExportFailed, otlp_json
from bot.tracing.spans import SERVICE_NAME, RunJournal, export_run, run_spans

__all__ = [
    "SERVICE_NAME",
    "JournalIds",
    "OtlpHttp",
    "OtlpJsonLines",
    "RunJournal",
    "TraceExportFailed",
    "export_run",
    "otlp_json",
    "run_spans",
    "span_id_for",
    "trace_id_for",
]
