"""The ``signoff`` command line. Exit status: 0 ok, 2 bad usage or input, 1 other failure."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from bot.cli.collection_pause import CollectionPause

if TYPE_CHECKING:
    from bot.app.settings import Settings

COMMAND_MODULES = {
    "runs": (
        *("start", "worker", "runs", "show", "cancel", "resume", "signal", "db"),
        *("serve", "history"),
    ),
    "journal": ("inspect", "fork", "eval"),
    "trace": ("trace",),
    "archive": ("prune", "import"),
    "agents": ("run", "approvals", "approve", "reject", "edit", "raise-budget"),
    "audit": ("audit",),
    "outbox": ("outbox",),
    "doctor": ("doctor",),
    "mcp_proxy": ("mcp",),
    "rules": ("rules",),
    "grants": ("grants",),
    "api_keys": ("api-key",),
    "slack_tokens": ("slack",),
}
"""The modules of ``bot.cli`` in the order their commands are listed, each with the commands
its ``add_commands`` adds: a command's module alone is imported to run it. (A command missing
here is still found, the slow way: every module is then imported.)"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``argv``, else this process's, which then exits when this
    returns); return the exit status. Automatic garbage collection is paused from here (the
    settings and the command's modules are imported in the pause) and, for a command that is
    not one-shot, given back before the command runs (see ``bot.cli.collection_pause``)."""
    with CollectionPause(process_exits=argv is None) as pause:
        return _run(argv, pause)


def _run(argv: Sequence[str] | None, pause: CollectionPause) -> int:
    """Parse ``argv`` and run its command (``main``)."""
    from agent_runtime.exceptions import SignoffError, UserError
    from bot.app.settings import Settings, SettingsError

    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        build_parser(Settings(), argv).parse_args(argv)  # --help and usage errors answer first
        return _fail(2, exc)
    args = build_parser(settings, argv).parse_args(argv)
    pause.end_unless_one_shot(args.command)
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
    """Return the argument parser for ``argv`` (else this process's arguments): the parser of
    the built-in command it names, alone (its module alone imported); else every subcommand,
    with the installed plugins' (only the one ``argv`` names, if it names one). ``signoff
    --help`` lists everything."""
    from bot.app.settings import Settings

    settings = settings or Settings()
    named = _command_named(sys.argv[1:] if argv is None else argv)
    if named is not None:
        parser, commands = _parser()
        for module, names in COMMAND_MODULES.items():
            if named in names:
                _command_module(module).add_commands(_OneCommand(commands, named))
        if named in commands.choices:
            return parser
    parser, commands = _parser()
    for module in COMMAND_MODULES:
        _command_module(module).add_commands(commands)
    _add_plugin_commands(commands, settings, named)
    return parser


def _parser() -> tuple[argparse.ArgumentParser, Any]:
    """A parser with no subcommand yet, and the action its subcommands are added to."""
    from bot.cli.common import Parser

    parser = Parser(prog="signoff", description="Durable agents with human sign-off.")
    commands: Any = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    return parser, commands


def _command_module(name: str) -> Any:
    """The module ``bot.cli.<name>``, imported now."""
    return importlib.import_module(f"bot.cli.{name}")


class _OneCommand:
    """The subcommands as the command modules see them when one command is to run: that
    command's parser is built, each other's is a ``_Skipped`` (argparse builds a parser's
    options and help eagerly: for forty commands, a few milliseconds of every start)."""

    def __init__(self, commands: Any, name: str) -> None:
        self._commands = commands
        self._name = name

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        """The command's parser if it is the one to run, else a ``_Skipped``."""
        if name != self._name:
            return _Skipped()
        return self._commands.add_parser(name, **kwargs)


class _Skipped:
    """Stands in for the parser of a command that is not to run: whatever is added to it
    (arguments, defaults, subcommands) is dropped."""

    def __getattr__(self, name: str) -> Callable[..., _Skipped]:
        return lambda *args, **kwargs: self


COMMAND_PLUGINS = "signoff.commands"
"""The entry-point group of installed packages that add commands (the dev tools add
``signoff dev`` and ``signoff demo`` this way): each entry is named for its command and names
a function called with the subcommands and the settings."""


def _add_plugin_commands(commands: Any, settings: Settings, named: str | None) -> None:
    """Add the commands of installed plugins: the one ``named``, or every one (finding them
    means reading every installed package's metadata)."""
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
