"""``signoff audit``: verify the approvals audit log, and anchor its head outside the database."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from agent_runtime.audit_anchors import Anchor
from agent_runtime.audit_report import AuditReport, examine
from bot.app.anchor_file import anchor_now, read_lines
from bot.app.settings import Settings
from bot.app.wiring import build_services
from bot.cli.common import Parser, UsageError, emit, json_flag

NO_KEYS = (
    "MACs not verified (no SIGNOFF_AUDIT_KEYS): only the hash chain was checked, "
    "and someone with write access to the database can rewrite entries and "
    "recompute the chain undetectably"
)


def add_commands(commands: Any) -> None:
    """Add ``signoff audit verify`` and ``signoff audit anchor``."""
    audit = commands.add_parser("audit", help="the approvals audit log")
    audit_commands = audit.add_subparsers(dest="audit_command", required=True, parser_class=Parser)
    verify = audit_commands.add_parser(
        "verify", help="check the hash chain, the entries' MACs (with the audit keys) and anchors"
    )
    verify.add_argument(
        "--anchors",
        metavar="PATH",
        help="an anchor file: every anchored entry must still be in the log",
    )
    json_flag(verify).set_defaults(handler=cmd_audit_verify)
    anchor = audit_commands.add_parser(
        "anchor", help="append the log's head (seq, hash, MAC) to an append-only file"
    )
    anchor.add_argument("--file", required=True, metavar="PATH")
    json_flag(anchor).set_defaults(handler=cmd_audit_anchor)


def cmd_audit_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Verify the audit log; exit 1 on any problem."""
    anchor_lines = None if args.anchors is None else _lines(args.anchors)
    entries, head = build_services(settings).approvals.store.audit_log()
    report = examine(entries, head, keys=settings.audit_keys, anchor_lines=anchor_lines)
    emit(args, report_json(report), "\n".join(report_lines(report, settings)))
    return 0 if report.ok else 1


def cmd_audit_anchor(args: argparse.Namespace, settings: Settings) -> int:
    """Append one anchor line to ``--file``."""
    store = build_services(settings).approvals.store
    try:
        anchor = anchor_now(store, args.file, datetime.now(UTC))
    except OSError as exc:
        raise UsageError(f"--file {args.file}: {exc.strerror}") from None
    emit(args, anchor_json(anchor), f"anchored entry {anchor.seq} in {args.file}")
    return 0


def report_json(report: AuditReport) -> dict[str, Any]:
    """The stable JSON of a report."""
    return {
        "entries": report.entries,
        "ok": report.ok,
        "problems": report.problems,
        "macs_verified": report.macs_verified,
        "signed_from": report.signed_from,
        "unsigned": report.unsigned,
        "anchors": report.anchors,
    }


def anchor_json(anchor: Anchor) -> dict[str, Any]:
    """The JSON of an anchor, as the file holds it."""
    return {
        "seq": anchor.seq,
        "hash": anchor.hash,
        "at": anchor.at.isoformat(),
        "kid": anchor.kid,
        "mac": anchor.mac,
    }


def report_lines(report: AuditReport, settings: Settings) -> list[str]:
    """The human-readable report: the problems, or that the log is intact, and what was checked."""
    lines = list(report.problems) or [f"audit log intact: {report.entries} entries"]
    if settings.audit_keys is not None:
        lines.append(f"MACs verified with keys {', '.join(settings.audit_keys.kids)}")
    else:
        lines.append(NO_KEYS)
    if report.unsigned:
        lines.append(f"unsigned entries (written before signing began): {report.unsigned}")
    if report.anchors is not None:
        lines.append(f"anchors checked: {report.anchors}")
    return lines


def _lines(path: str) -> list[str]:
    try:
        return read_lines(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"--anchors {path}: {reason}") from None
