"""Helpers shared by the command-line modules."""

from __future__ import annotations

import argparse
import getpass
import json
from typing import Any, NoReturn

from agent_runtime import Actor, RunId, UserError, parse_run_id
from agent_runtime.exceptions import UnsafeJson
from agent_runtime.json_limits import strict_loads


class UsageError(UserError):
    """The command line itself is wrong (a malformed argument)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit with status 2."""

    def error(self, message: str) -> NoReturn:
        """Print a one-line error and exit 2."""
        self.exit(2, f"signoff: error: {message}\n")


def json_flag(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--json``."""
    parser.add_argument("--json", action="store_true", help="print stable JSON for scripts")
    return parser


def as_flag(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Add ``--as USER`` (a Slack user id; ``--name`` optionally gives a display name)."""
    parser.add_argument(
        "--as", dest="actor", required=required, metavar="USER", help="the Slack user id you act as"
    )
    parser.add_argument("--name", default="", help="your display name, for the record")
    parser.add_argument(
        "--team",
        default="",
        metavar="TEAM",
        help="the Slack workspace (team id) of --as; required when Signoff serves many",
    )
    parser.add_argument(
        "--enterprise", default="", metavar="ORG", help="the Enterprise Grid organization of --as"
    )


def actor(args: argparse.Namespace) -> Actor:
    """Return the person the command acts as."""
    return Actor(
        user_id=args.actor, name=args.name, team_id=args.team, enterprise_id=args.enterprise
    )


def workspace_actor(args: argparse.Namespace, many_workspaces: bool) -> Actor:
    """Return the person the command acts as, who must name their workspace when Signoff
    serves many (a user id means someone only within one workspace)."""
    if many_workspaces and not (args.team or args.enterprise):
        raise UsageError(
            "--as needs --team (or --enterprise) when Signoff serves many Slack workspaces "
            "(SIGNOFF_SLACK_MODE=oauth): a user id names a person only within one workspace"
        )
    return actor(args)


def cli_user() -> Actor:
    """The person at this terminal, when no ``--as`` says otherwise."""
    name = getpass.getuser()
    return Actor(user_id=f"cli:{name}", name=name)


def json_argument(flag: str, text: str) -> Any:
    """Parse a JSON argument (within ``json_limits``) or raise UsageError naming the flag."""
    try:
        return strict_loads(text)
    except UnsafeJson as exc:
        raise UsageError(f"{flag} cannot be stored as JSON: it holds {exc.problem}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc.msg} at character {exc.pos}") from None


def run_id(text: str) -> RunId:
    """argparse type: a run id."""
    try:
        return parse_run_id(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a run id") from None


def port_number(text: str) -> int:
    """argparse type: a TCP port number (0: any free port)."""
    if not text.isdigit() or not 0 <= int(text) < 65536:
        raise argparse.ArgumentTypeError(f"expected a TCP port number, not {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
    return value


def emit(args: argparse.Namespace, data: Any, human: str) -> None:
    """Print ``data`` as JSON with ``--json``, else ``human``."""
    if getattr(args, "json", False):
        print(json.dumps(data, ensure_ascii=False, sort_keys=True))
    else:
        print(human)
