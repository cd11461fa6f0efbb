"""The ``signoff`` command line. Exit status: 0 ok, 2 bad usage or input, 1 other failure."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from agent_runtime import (
    AgentNotFound,
    ApprovalNotFound,
    EventAlreadyDelivered,
    InvalidConfiguration,
    InvalidInput,
    InvalidRunState,
    NotSerializable,
    RunNotFound,
    SignoffError,
    WorkflowNotFound,
)
from agent_runtime.budget_control import NotAllowed
from agent_runtime.exceptions import GrantNotFound
from bot.app.settings import Settings, SettingsError
from bot.cli import (
    agents,
    api_keys,
    archive,
    audit,
    doctor,
    grants,
    journal,
    mcp_proxy,
    outbox,
    rules,
    runs,
    trace,
)
from bot.cli.common import Parser, UsageError
from devkit import cli as cli_dev
from devkit.demo.ledger_cli import add_demo_commands

USER_ERRORS = (
    UsageError,
    InvalidConfiguration,
    RunNotFound,
    WorkflowNotFound,
    AgentNotFound,
    ApprovalNotFound,
    InvalidInput,
    InvalidRunState,
    NotSerializable,
    EventAlreadyDelivered,
    SettingsError,
    NotAllowed,
    GrantNotFound,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        return _fail(2, exc)
    args = build_parser(settings).parse_args(argv)
    try:
        handler: Callable[[argparse.Namespace, Settings], int] = args.handler
        return handler(args, settings)
    except USER_ERRORS as exc:
        return _fail(2, exc)
    except SignoffError as exc:
        return _fail(1, exc)
    except KeyboardInterrupt:
        return 0 if args.command == "serve" else 130


def build_parser(settings: Settings | None = None) -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand."""
    settings = settings or Settings()
    parser = Parser(prog="signoff", description="Durable agents with human sign-off.")
    commands: Any = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    runs.add_commands(commands)
    runs.add_serve_command(commands)
    runs.add_history_command(commands)
    journal.add_commands(commands)
    trace.add_commands(commands)
    archive.add_commands(commands)
    agents.add_commands(commands)
    audit.add_commands(commands)
    outbox.add_commands(commands)
    cli_dev.add_commands(commands)
    doctor.add_commands(commands)
    mcp_proxy.add_commands(commands)
    rules.add_commands(commands)
    grants.add_commands(commands)
    api_keys.add_commands(commands)
    add_demo_commands(
        commands,
        port=settings.demo_provider_port,
        ledger_path=settings.demo_ledger_path,
        provider_url=settings.demo_provider_url,
    )
    return parser


def _fail(code: int, exc: BaseException) -> int:
    print(f"signoff: error: {exc}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
