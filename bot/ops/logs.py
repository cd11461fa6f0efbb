"""Log set-up for the command line: one line per record, as text or as a JSON object.

Whatever the format, every secret the process knows (tokens, signing secret, API key,
audit keys, the database password) is masked in the finished line, tracebacks included, and
so is anything shaped like a Slack token (the workspaces' tokens come from the database).

A JSON line names the trace it belongs to (``trace_id``, ``span_id``, as OpenTelemetry writes
them in hex): the OpenTelemetry span current where the record was made, or else, for a record
about a run, the run's own trace as ``signoff trace`` and ``SIGNOFF_OTLP_ENDPOINT`` export it
(the span of the journal entry the record names in ``step``, or the run's span).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from agent_runtime import RunId
from bot.tracing.ids import span_id_for

FIELDS = ("action", "run_id", "step")
MASK = "[secret]"
SLACK_TOKEN = re.compile(r"xox[a-z](?:\.xox[a-z])?-[A-Za-z0-9-]+")
"""Slack's bot, user, app, refresh and rotating tokens (``xoxb-…``, ``xoxe.xoxb-…``,
``xoxe-1-…``)."""

STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
"""Attributes every record has: anything else on a record came in through ``extra``."""
RUN_ID = re.compile(r"[0-9a-f]{32}")
"""A run id, which is also its trace id in hex."""


class FieldsFormatter(logging.Formatter):
    """Appends the structured fields a record carries (``action``, ``run_id``, ``step``)."""

    def format(self, record: logging.LogRecord) -> str:
        """Format the record, then add ``key=value`` for each field present."""
        text = super().format(record)
        fields = " ".join(f"{k}={getattr(record, k)}" for k in FIELDS if hasattr(record, k))
        return f"{text} {fields}" if fields else text


class JsonFormatter(logging.Formatter):
    """One JSON object per record: timestamp, level, logger, message, then its ``extra``."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as one line of JSON."""
        entry: dict[str, Any] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in STANDARD})
        entry.update(trace_fields(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def trace_fields(record: logging.LogRecord) -> dict[str, str]:
    """The ``trace_id`` and ``span_id`` of the record: the current span's, else its run's."""
    current = trace.get_current_span().get_span_context()
    if current.is_valid:
        return {"trace_id": f"{current.trace_id:032x}", "span_id": f"{current.span_id:016x}"}
    run_id = getattr(record, "run_id", None)
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        return {}
    step = getattr(record, "step", None)
    position = step if isinstance(step, int) and not isinstance(step, bool) else None
    return {"trace_id": run_id, "span_id": f"{span_id_for(RunId(run_id), position):016x}"}


class Masked(logging.Formatter):
    """Formats with another formatter, then masks every secret in the result."""

    def __init__(self, inner: logging.Formatter, secrets: Iterable[str]) -> None:
        super().__init__()
        self._inner = inner
        forms = {form for s in secrets if s for form in (s, json.dumps(s)[1:-1])}
        self._secrets = sorted(forms, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        """Return the inner formatter's line with each secret replaced by ``MASK``."""
        line = self._inner.format(record)
        for secret in self._secrets:
            line = line.replace(secret, MASK)
        return SLACK_TOKEN.sub(MASK, line)


def formatter(log_format: str = "text", secrets: Iterable[str] = ()) -> logging.Formatter:
    """Return the formatter for ``log_format`` (``text`` or ``json``), masking ``secrets``."""
    inner = (
        JsonFormatter()
        if log_format == "json"
        else FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    return Masked(inner, secrets)


def configure(
    level: int = logging.INFO, *, log_format: str = "text", secrets: Iterable[str] = ()
) -> None:
    """Send log records to stderr, one line each, never showing ``secrets``."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format, secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("alembic", "waitress"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # skipped overlapping runs are fine
    logging.captureWarnings(True)
    threading.excepthook = _log_thread_death


def _log_thread_death(args: threading.ExceptHookArgs) -> None:
    """Log an exception that ended a thread (as a record, so in the configured format)."""
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger(__name__).error(
        "a thread died",
        extra={"action": "thread", "thread": name},
        exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback),
    )
