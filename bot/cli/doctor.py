"""``signoff doctor``: the configuration checks a person would otherwise learn from failures
(``bot.cli.doctor_checks``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from bot.app.settings import Settings
from bot.cli.common import json_flag


def add_commands(commands: Any) -> None:
    """Register ``doctor``."""
    doctor = commands.add_parser(
        "doctor",
        help="check the configuration: Slack token and "
        "scopes, signing secret, database, approvers, channel",
    )
    doctor.add_argument(
        "--channel", metavar="ID", help="also check that the bot is a member of this channel"
    )
    doctor.add_argument(
        "--team", metavar="TEAM", help="the workspace of --channel (with SIGNOFF_SLACK_MODE=oauth)"
    )
    json_flag(doctor).set_defaults(handler=cmd_doctor)


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    """Run every check, print one line each; exit 1 if any failed."""
    from bot.cli.doctor_checks import run_checks

    checks = list(run_checks(settings, args.channel, args.team))
    if args.json:
        print(
            json.dumps(
                [{"check": c.name, "ok": c.ok, "detail": c.detail} for c in checks], sort_keys=True
            )
        )
    else:
        for check in checks:
            print(f"{'ok  ' if check.ok else 'FAIL'}  {check.name}: {check.detail}")
    return 0 if all(c.ok for c in checks) else 1
