"""``signoff audit``: verify the approvals audit log's chains, and anchor their heads outside
the database."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from bot.app.settings import Settings
from bot.cli.common import Parser, UsageError, emit, json_flag

if TYPE_CHECKING:
    from agent_runtime.audit_anchors import Anchor
    from agent_runtime.audit_report import AuditReport

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
        "verify",
        help="check every shard's hash chain, the entries' MACs (with the audit keys) and anchors",
    )
    verify.add_argument(
        "--anchors",
        metavar="PATH",
        help="an anchor file: every anchored entry must still be in its chain",
    )
    json_flag(verify).set_defaults(handler=cmd_audit_verify)
    anchor = audit_commands.add_parser(
        "anchor",
        help="append every chain's head (seq, hash, MAC) as one line to an append-only file",
    )
    anchor.add_argument("--file", required=True, metavar="PATH")
    json_flag(anchor).set_defaults(handler=cmd_audit_anchor)


def cmd_audit_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Verify the audit log; exit 1 on any problem."""
    from agent_runtime.audit_report import examine
    from bot.app.wiring import build_services

    anchor_lines = None if args.anchors is None else _lines(args.anchors)
    entries, heads = build_services(settings).approvals.store.audit_log()
    report = examine(entries, heads, keys=settings.audit_keys, anchor_lines=anchor_lines)
    emit(args, report_json(report), "\n".join(report_lines(report, settings)))
    return 0 if report.ok else 1


def cmd_audit_anchor(args: argparse.Namespace, settings: Settings) -> int:
    """Append one anchor line to ``--file``."""
    from bot.app.anchor_file import anchor_now
    from bot.app.wiring import build_services

    store = build_services(settings).approvals.store
    try:
        anchor = anchor_now(store, args.file, datetime.now(UTC))
    except OSError as exc:
        raise UsageError(f"--file {args.file}: {exc.strerror}") from None
    chains = len(anchor.heads)
    emit(args, anchor_json(anchor), f"anchored {chains} chains' heads in {args.file}")
    return 0


def report_json(report: AuditReport) -> dict[str, Any]:
    """The stable JSON of a report."""
    return {
        "entries": report.entries,
        "ok": report.ok,
        "problems": report.problems,
        "macs_verified": report.macs_verified,
        "unsigned": report.unsigned,
        "anchors": report.anchors,
        "chains": [
            {
                "shard": chain.shard,
                "entries": chain.entries,
                "head": chain.head,
                "ok": chain.ok,
                "signed_from": chain.signed_from,
                "unsigned": chain.unsigned,
            }
            for chain in report.chains
        ],
    }


def anchor_json(anchor: Anchor) -> dict[str, Any]:
    """The JSON of an anchor, as the file holds it (with every head's key id and MAC)."""
    heads = [
        {"shard": h.shard, "seq": h.seq, "hash": h.hash, "kid": h.kid, "mac": h.mac}
        for h in anchor.heads
    ]
    return {"at": anchor.at.isoformat(), "heads": heads}


def report_lines(report: AuditReport, settings: Settings) -> list[str]:
    """The human-readable report: the problems, or that the log is intact, and what was checked."""
    intact = f"audit log intact: {report.entries} entries in {len(report.chains)} chains"
    lines = list(report.problems) or [intact]
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
    from bot.app.anchor_file import read_lines

    try:
        return read_lines(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"--anchors {path}: {reason}") from None
