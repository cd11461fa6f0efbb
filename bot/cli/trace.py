"""``signoff trace``: a run's journal exported as OpenTelemetry spans (OTLP)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.app.settings import TRACES_PATH, Settings, SettingsError, traces_url
from bot.cli.common import positive_float, run_id

if TYPE_CHECKING:
    from agent_runtime import RunId
    from bot.app.wiring import Services
    from bot.tracing.otlp import OtlpHttp, OtlpJsonLines
    from bot.tracing.spans import RunJournal


def add_commands(commands: Any) -> None:
    """Add ``signoff trace``."""
    trace = commands.add_parser(
        "trace", help="export a run's journal as OpenTelemetry spans (OTLP JSON or OTLP/HTTP)"
    )
    trace.add_argument("run", type=run_id)
    target = trace.add_mutually_exclusive_group()
    target.add_argument(
        "--otlp",
        metavar="URL",
        type=otlp_url,
        help="send to this OTLP/HTTP traces endpoint, e.g. "
        f"http://127.0.0.1:4318{TRACES_PATH} (a URL without a path "
        f"gets {TRACES_PATH})",
    )
    target.add_argument(
        "--file", metavar="F", type=Path, help="append the spans to F as one line of OTLP JSON"
    )
    trace.add_argument(
        "--timeout",
        type=positive_float,
        default=10.0,
        metavar="SECONDS",
        help="how long --otlp may take, retries included (default 10)",
    )
    trace.set_defaults(handler=cmd_trace)


def otlp_url(text: str) -> str:
    """argparse type: an http(s) URL; a bare host gets the standard ``/v1/traces`` path."""
    try:
        return traces_url(text)
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_trace(args: argparse.Namespace, settings: Settings) -> int:
    """Export the run's spans to the collector, the file or stdout."""
    from bot.app.wiring import build_services
    from bot.tracing.otlp import OtlpJsonLines

    journal = load_journal(build_services(settings), args.run)
    if args.otlp:
        _send(journal, args.otlp, args.timeout)
        print(f"sent {_count(journal)} spans of run {journal.run.id} to {args.otlp}")
    elif args.file:
        _append(journal, args.file)
        print(f"wrote {_count(journal)} spans of run {journal.run.id} to {args.file}")
    else:
        _deliver(journal, OtlpJsonLines(sys.stdout))
    return 0


def load_journal(services: Services, run: RunId) -> RunJournal:
    """Read the run, its journal, its failed attempts and its approvals."""
    from bot.tracing.spans import RunJournal

    runtime = services.runtime
    found = runtime.get(run)
    return RunJournal(
        run=found,
        steps=runtime.journal(found.id),
        attempts=runtime.attempts(found.id),
        approvals=services.approvals.store.list_approvals(run_id=found.id),
    )


def _send(journal: RunJournal, url: str, timeout: float) -> None:
    from bot.tracing.otlp import OtlpHttp

    exporter = OtlpHttp(url, timeout=timeout)
    try:
        _deliver(journal, exporter)
    finally:
        exporter.shutdown()


def _append(journal: RunJournal, path: Path) -> None:
    from bot.tracing.otlp import OtlpJsonLines, TraceExportFailed

    try:
        with path.open("a", encoding="utf-8") as out:
            _deliver(journal, OtlpJsonLines(out, name=str(path)))
    except OSError as exc:
        raise TraceExportFailed(
            f"cannot write {path}: {exc.strerror or exc}", retryable=False
        ) from exc


def _deliver(journal: RunJournal, exporter: OtlpHttp | OtlpJsonLines) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    from bot.tracing.otlp import TraceExportFailed
    from bot.tracing.spans import export_run

    if export_run(journal, exporter) is not SpanExportResult.SUCCESS:
        raise exporter.failure or TraceExportFailed("the spans were not exported", retryable=False)


def _count(journal: RunJournal) -> int:
    return len(journal.steps) + 1
