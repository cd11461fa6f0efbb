"""Retention commands: ``signoff prune`` removes old finished runs, ``signoff import`` restores."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.app.settings import Settings
from bot.cli.common import UsageError, emit, json_flag

if TYPE_CHECKING:
    from store import ImportResult, PruneResult

PRUNE_DESCRIPTION = """\
Remove the finished runs (completed, failed, cancelled) last updated more than DAYS days
ago, with their journal, failed attempts, events, approvals and delivered notices.
Pending, running and waiting runs are never removed; a finished run whose Slack notices
are not all delivered yet is skipped and reported. With --archive, the runs are first
appended to FILE.jsonl, one JSON line per run, synced to disk before anything is deleted;
`signoff import FILE.jsonl` restores them. The approvals audit log is kept whole: it is a
hash chain, and removing entries would break it."""

IMPORT_DESCRIPTION = """\
Restore the runs of an archive written by `signoff prune --archive`, one transaction per
run. Every line is checked first: a malformed line is refused with its number, and
nothing is imported. Runs already present are skipped and reported, so importing the
same archive twice is harmless."""

NOUNS = {
    "runs": "run",
    "steps": "step",
    "attempts": "attempt",
    "events": "event",
    "approvals": "approval",
    "outbox": "notice",
    "api_approvals": "API request",
    "grants": "grant",
}


def add_commands(commands: Any) -> None:
    """Add ``prune`` and ``import`` to the ``signoff`` parser."""
    prune_parser = commands.add_parser(
        "prune",
        help="remove finished runs older than DAYS days (the audit log is kept)",
        description=PRUNE_DESCRIPTION,
    )
    prune_parser.add_argument(
        "--older-than",
        type=days,
        required=True,
        metavar="DAYS",
        help="age of the last update, in days (fractions allowed)",
    )
    prune_parser.add_argument(
        "--archive",
        type=Path,
        metavar="FILE.jsonl",
        help="append the removed runs to this file first",
    )
    prune_parser.add_argument(
        "--dry-run", action="store_true", help="list what would be removed; change nothing"
    )
    json_flag(prune_parser).set_defaults(handler=cmd_prune)

    restore = commands.add_parser(
        "import", help="restore runs from a prune archive", description=IMPORT_DESCRIPTION
    )
    restore.add_argument("archive", type=Path, metavar="FILE.jsonl")
    json_flag(restore).set_defaults(handler=cmd_import)


def days(text: str) -> timedelta:
    """argparse type: a number of days >= 0, fractions allowed."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of days >= 0, not {text!r}")
    try:
        return timedelta(days=value)
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} days is too long") from None


def cutoff(now: datetime, age: timedelta) -> datetime:
    """Return ``now - age``, or the earliest time there is if that is before it."""
    try:
        return now - age
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


def cmd_prune(args: argparse.Namespace, settings: Settings) -> int:
    """Remove (or list) old finished runs, archiving them first if asked."""
    from bot.app.wiring import build_services

    services = build_services(settings)
    before = cutoff(services.runtime.clock.now(), args.older_than)
    with _archive_errors():
        result = services.stores.prune(cutoff=before, archive=args.archive, dry_run=args.dry_run)
    emit(args, prune_json(result, args.archive), prune_text(result, args.archive))
    return 0


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    """Restore the runs of an archive."""
    from bot.app.wiring import build_services

    services = build_services(settings)
    with _archive_errors():
        result = services.stores.import_archive(args.archive)
    emit(args, import_json(result, args.archive), import_text(result, args.archive))
    return 0


@contextmanager
def _archive_errors() -> Iterator[None]:
    """An unusable archive is bad input: exit status 2, like any usage error."""
    from store import ArchiveError

    try:
        yield
    except ArchiveError as exc:
        raise UsageError(str(exc)) from exc


def prune_json(result: PruneResult, archive: Path | None) -> dict[str, Any]:
    """Return the stable JSON form of a prune."""
    return {
        "dry_run": result.dry_run,
        "cutoff": result.cutoff.isoformat(),
        "archive": None if archive is None or result.dry_run else str(archive),
        "removed": {"count": len(result.removed), "ids": list(result.removed)},
        "skipped": {"count": len(result.skipped), "ids": list(result.skipped)},
        "rows": dict(result.rows),
    }


def prune_text(result: PruneResult, archive: Path | None) -> str:
    """Return the human summary of a prune; a dry run lists the runs too."""
    verb = "would remove" if result.dry_run else "removed"
    lines = [f"{verb} {_counted(result.rows)} last updated before {result.cutoff.isoformat()}"]
    if result.dry_run:
        lines += [f"  {run_id}" for run_id in result.removed]
    elif archive is not None and result.removed:
        lines.append(f"archived to {archive}")
    if result.skipped:
        lines.append(
            f"kept {_plural(len(result.skipped), 'run')} with Slack notices not yet delivered:"
        )
        lines += [f"  {run_id}" for run_id in result.skipped]
    return "\n".join(lines)


def import_json(result: ImportResult, archive: Path) -> dict[str, Any]:
    """Return the stable JSON form of an import."""
    return {
        "archive": str(archive),
        "imported": {"count": len(result.imported), "ids": list(result.imported)},
        "existing": {"count": len(result.existing), "ids": list(result.existing)},
        "rows": dict(result.rows),
    }


def import_text(result: ImportResult, archive: Path) -> str:
    """Return the human summary of an import."""
    lines = [f"imported {_counted(result.rows)} from {archive}"]
    if result.existing:
        lines.append(f"skipped {_plural(len(result.existing), 'run')} already present:")
        lines += [f"  {run_id}" for run_id in result.existing]
    return "\n".join(lines)


def _counted(rows: Mapping[str, int]) -> str:
    """``3 runs (12 steps, 1 attempt, ...)``: the runs, then their other rows."""
    runs = _plural(rows.get("runs", 0), "run")
    others = [_plural(n, NOUNS.get(name, name)) for name, n in rows.items() if name != "runs" and n]
    return f"{runs} ({', '.join(others)})" if others else runs


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
