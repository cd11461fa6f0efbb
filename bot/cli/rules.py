"""``signoff rules test|suggest``: replay the approval rules over the recorded approvals, and
suggest narrow ones the decisions support."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agent_runtime.approvals import Approval
from agent_runtime.exceptions import RunNotFound
from agent_runtime.ids import parse_run_id
from agent_runtime.rule_replay import Overruled, ReplayReport, replay
from agent_runtime.rule_suggest import MIN_SUPPORT, Suggestion, suggest
from agent_runtime.rules import RuleContext
from bot.app.settings import Settings, read_rules_file
from bot.cli.common import Parser, emit, json_flag, positive_float, positive_int

if TYPE_CHECKING:
    from agent_runtime.approval_service import Approvals
    from bot.app.wiring import Services

PAGE = 500
"""How many approvals one read of the history takes."""


def add_commands(commands: Any) -> None:
    """Add ``signoff rules test`` and ``signoff rules suggest``."""
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
    suggest = rules_commands.add_parser(
        "suggest",
        help="suggest narrow rules that would have matched only approved calls (not enabled)",
    )
    suggest.add_argument(
        "--since",
        type=positive_float,
        metavar="DAYS",
        help="only approvals requested in the last DAYS days (default: all)",
    )
    suggest.add_argument(
        "--min-approvals",
        type=positive_int,
        default=MIN_SUPPORT,
        metavar="N",
        help=f"the fewest approved calls a suggestion must cover (default {MIN_SUPPORT})",
    )
    json_flag(suggest).set_defaults(handler=cmd_rules_suggest)


def cmd_rules_test(args: argparse.Namespace, settings: Settings) -> int:
    """Print what the rules would have decided over the history."""
    from bot.app.wiring import build_services

    rules = settings.rules if args.rules is None else read_rules_file(args.rules, "--rules")
    services = build_services(settings)
    history = _history(services.approvals, _since(args.since))
    report = replay(rules, history, contexts(services))
    data = {"rules": len(rules.rules), "since_days": args.since, **report.to_json()}
    emit(args, data, "\n".join(report_lines(report, len(rules.rules), args.since)))
    return 0


def cmd_rules_suggest(args: argparse.Namespace, settings: Settings) -> int:
    """Print narrow rules people's past decisions support, each with its replay."""
    from bot.app.wiring import build_services

    services = build_services(settings)
    history = list(_history(services.approvals, _since(args.since)))
    found = suggest(history, contexts(services), min_support=args.min_approvals)
    data = {"since_days": args.since, "suggestions": [s.to_json() for s in found]}
    emit(args, data, "\n".join(suggestion_lines(found, args.since)))
    return 0


def contexts(services: Services) -> Callable[[Approval], RuleContext]:
    """What rules saw of each recorded approval: its requester and its run's channel."""
    channels: dict[str, str] = {}

    def context(approval: Approval) -> RuleContext:
        if approval.run_id not in channels:
            channels[approval.run_id] = _channel(services, approval.run_id)
        return services.approvals.rule_context(
            approval.tool, approval.requester, channels[approval.run_id]
        )

    return context


def _channel(services: Services, run_id: str) -> str:
    """The channel the run was started from ("" if unknown, or the run is gone)."""
    from agent_runtime.agent import channel_of

    try:
        data = services.runtime.get(parse_run_id(run_id)).input
    except (RunNotFound, ValueError):
        return ""
    return channel_of(data.get("context")) if isinstance(data, dict) else ""


def _since(days: float | None) -> datetime | None:
    return None if days is None else datetime.now(UTC) - timedelta(days=days)


def _history(approvals: Approvals, since: datetime | None) -> Iterator[Approval]:
    """Yield the recorded approvals requested since ``since``, newest first."""
    after = None
    while True:
        page = approvals.store.list_approvals(limit=PAGE, after=after)
        for approval in page:
            if since is not None and approval.requested_at < since:
                return
            yield approval
        if len(page) < PAGE:
            return
        after = page[-1].id


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


def suggestion_lines(found: list[Suggestion], since: float | None) -> list[str]:
    """The suggestions for a person: each rule (in shadow mode) and its replay."""
    window = "all time" if since is None else f"the last {since:g} days"
    if not found:
        return [f"no narrow rule is supported by the decisions of {window}"]
    lines = [
        f"{len(found)} suggested rule{'' if len(found) == 1 else 's'} from the decisions of "
        f"{window} "
        "(none is enabled: add one to SIGNOFF_RULES_FILE to use it, in shadow mode first)"
    ]
    for suggestion in found:
        lines += ["", json.dumps(suggestion.rule.to_json(), ensure_ascii=False, sort_keys=True)]
        lines += [f"  {line}" for line in report_lines(suggestion.replayed, 1, since)]
    return lines


def _line(overruled: Overruled, verdict: str) -> str:
    args = json.dumps(overruled.args, ensure_ascii=False, sort_keys=True)
    reason = f": “{overruled.reason}”" if overruled.reason else ""
    return (
        f"  {overruled.approval_id} {overruled.tool} {args} (rule:{overruled.rule}) "
        f"{verdict} by {overruled.decided_by}{reason}"
    )
