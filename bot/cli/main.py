"""The ``signoff`` command line. Exit status: 0 ok, 2 bad usage or input, 1 other failure."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from agent_runtime.exceptions import SignoffError, UserError
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
    slack_tokens,
    trace,
)
from bot.cli.common import Parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        build_parser(Settings(), argv).parse_args(argv)  # --help and usage errors answer first
        return _fail(2, exc)
    args = build_parser(settings, argv).parse_args(argv)
    try:
        handler: Callable[[argparse.Namespace, Settings], int] = args.handler
        status = handler(args, settings)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        return _reader_gone()
    except UserError as exc:
        return _fail(2, exc)
    except SignoffError as exc:
        return _fail(1, exc)
    except KeyboardInterrupt:
        return 0 if args.command == "serve" else 130


def _reader_gone() -> int:
    """The reader of our output went away (``signoff runs | head -1``): stop quietly, as
    command-line tools do, with stdout pointed at /dev/null so the exit flush cannot fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


def build_parser(
    settings: Settings | None = None, argv: Sequence[str] | None = None
) -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand (of installed plugins, only the one
    ``argv`` names, if it names one: ``signoff serve`` imports no plugin)."""
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
    doctor.add_commands(commands)
    mcp_proxy.add_commands(commands)
    rules.add_commands(commands)
    grants.add_commands(commands)
    api_keys.add_commands(commands)
    slack_tokens.add_commands(commands)
    _add_plugin_commands(commands, settings, argv)
    return parser


COMMAND_PLUGINS = "signoff.commands"
"""The entry-point group of installed packages that add commands (the dev tools add
``signoff dev`` and ``signoff demo`` this way): each entry is named for its command and names
a function called with the subcommands and the settings."""


def _add_plugin_commands(commands: Any, settings: Settings, argv: Sequence[str] | None) -> None:
    """Add the commands of installed plugins: none when ``argv`` names a built-in command
    (finding the plugins means reading every installed package's metadata)."""
    named = _command_named(sys.argv[1:] if argv is None else argv)
    if named in commands.choices:
        return
    from importlib.metadata import entry_points

    plugins = entry_points(group=COMMAND_PLUGINS)
    chosen = [entry for entry in plugins if named is None or entry.name == named]
    for entry in chosen:
        entry.load()(commands, settings)


def _command_named(argv: Sequence[str]) -> str | None:
    """Return the command ``argv`` names (its first argument not an option), if any."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _fail(code: int, exc: BaseException) -> int:
    print(f"signoff: error: {exc}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
