"""``signoff outbox --failed``: the Slack notices given up, and why."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from bot.app.settings import Settings
from bot.cli.common import UsageError, emit, json_flag, positive_int

if TYPE_CHECKING:
    from agent_runtime.notices import DeadNotice

DEFAULT_LIMIT = 50


def add_commands(commands: Any) -> None:
    """Add ``signoff outbox``."""
    outbox = commands.add_parser("outbox", help="the queue of Slack notices")
    outbox.add_argument(
        "--failed",
        action="store_true",
        help="list the notices Slack refused for good, newest first",
    )
    outbox.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        help=f"list at most this many (default {DEFAULT_LIMIT})",
    )
    json_flag(outbox).set_defaults(handler=cmd_outbox)


def cmd_outbox(args: argparse.Namespace, settings: Settings) -> int:
    """List the dead notices."""
    from bot.app.wiring import build_services

    if not args.failed:
        raise UsageError("say which notices to list: signoff outbox --failed")
    dead = build_services(settings).outbox.dead_notices(args.limit)
    emit(
        args,
        [notice_json(n) for n in dead],
        "\n".join(notice_line(n) for n in dead) or "no failed notices",
    )
    return 0


def notice_json(notice: DeadNotice) -> dict[str, Any]:
    """The stable JSON of a dead notice."""
    return {
        "key": notice.key,
        "run_id": notice.run_id,
        "kind": notice.kind,
        "created_at": notice.created_at.isoformat(),
        "attempts": notice.attempts,
        "error": notice.error,
    }


def notice_line(notice: DeadNotice) -> str:
    """One line for a person: when, what, for which run, why."""
    run = notice.run_id or "-"
    return (
        f"{notice.created_at:%Y-%m-%d %H:%M:%S} {notice.kind} run {run} "
        f"after {notice.attempts} attempt(s): {notice.error or 'no error recorded'} "
        f"[{notice.key}]"
    )
