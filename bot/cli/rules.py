"""``signoff rules test``: replay the approval rules over the recorded approvals."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_runtime.approval_service import Approvals
from agent_runtime.approvals import Approval
from agent_runtime.rule_replay import Overruled, ReplayReport, replay
from bot.app.settings import Settings, read_rules_file
from bot.app.wiring import build_services
from bot.cli.common import Parser, emit, json_flag, positive_float

PAGE = 500
"""How many approvals one read of the history takes."""


def add_commands(commands: Any) -> None:
    """Add ``signoff rules test``."""
    rules = commands.add_parser("rules", help="approval rules")
    rules_commands = rules.add_subparsers(dest="rules_command", required=True, parser_class=Parser)
    test = rules_commands.add_parser(
        "test", help="replay the rules over recorded approvals: what they would have decided"
    )
    test.add_argument(
        "--since",
        type=positive_float,
        metavar="DAYS",
        help="only approvals requested in the last DAYS days (default: all)",
    )
    test.add_argument(
        "--rules", metavar="PATH", help="a rules file to try instead of SIGNOFF_RULES_FILE"
    )
    json_flag(test).set_defaults(handler=cmd_rules_test)


def cmd_rules_test(args: argparse.Namespace, settings: Settings) -> int:
    """Print what the rules would have decided over the history."""
    rules = settings.rules if args.rules is None else read_rules_file(args.rules, "--rules")
    approvals = build_services(settings).approvals
    since = None if args.since is None else datetime.now(UTC) - timedelta(days=args.since)
    report = replay(
        rules, _history(approvals, since), lambda a: approvals.rule_context(a.tool, a.requester)
    )
    data = {"rules": len(rules.rules), "since_days": args.since, **report.to_json()}
    emit(args, data, "\n".join(report_lines(report, len(rules.rules), args.since)))
    return 0


def _history(approvals: Approvals, since: datetime | None) -> Iterator[Approval]:
    """Yield the recorded approvals requested since ``since``, newest first."""
    offset = 0
    while True:
        page = approvals.store.list_approvals(limit=PAGE, offset=offset)
        for approval in page:
            if since is not None and approval.requested_at < since:
                return
            yield approval
        if len(page) < PAGE:
            return
        offset += PAGE


def report_lines(report: ReplayReport, rules: int, since: float | None) -> list[str]:
    """The human-readable report."""
    window = "all time" if since is None else f"the last {since:g} days"
    lines = [
        f"replayed {report.approvals} approvals ({window}) against {rules} rules",
        f"  would auto-approve: {report.auto_approved}",
        f"  would auto-deny:    {report.auto_denied}",
        f"  left to people:     {report.left_to_people}",
        f"would auto-approve, but a person rejected: {len(report.approved_but_rejected)}",
    ]
    lines += [_line(o, "rejected") for o in report.approved_but_rejected]
    lines.append(f"would auto-deny, but a person approved: {len(report.denied_but_approved)}")
    lines += [_line(o, "approved") for o in report.denied_but_approved]
    return lines


def _line(overruled: Overruled, verdict: str) -> str:
    args = json.dumps(overruled.args, ensure_ascii=False, sort_keys=True)
    reason = f": “{overruled.reason}”" if overruled.reason else ""
    return (
        f"  {overruled.approval_id} {overruled.tool} {args} (rule:{overruled.rule}) "
        f"{verdict} by {overruled.decided_by}{reason}"
    )
