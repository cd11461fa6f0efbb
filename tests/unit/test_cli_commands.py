"""The command line knows which of its modules adds each command, so that running a command
imports that module alone, and still lists every command."""

from __future__ import annotations

import argparse
import importlib

from bot.cli.main import COMMAND_MODULES, build_parser


def test_each_module_adds_exactly_the_commands_listed_for_it() -> None:
    """`COMMAND_MODULES` names, for each module, the commands its `add_commands` adds."""
    for module, names in COMMAND_MODULES.items():
        commands = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"bot.cli.{module}").add_commands(commands)
        assert tuple(commands.choices) == names, module


def test_the_parser_of_a_named_command_is_that_command_alone() -> None:
    """`signoff approve …` builds the parser of `approve` alone; with no command named, the
    parser lists every built-in command, in the modules' order."""
    one: dict[str, object] = _choices(build_parser(argv=["approve", "A1", "--as", "U1"]))
    every = _choices(build_parser(argv=["--help"]))
    assert list(one) == ["approve"]
    assert [name for name in every if name not in ("demo", "dev")] == [
        name for names in COMMAND_MODULES.values() for name in names
    ]


def _choices(parser: argparse.ArgumentParser) -> dict[str, object]:
    """The subcommands ``parser`` knows, by name, in the order they were added."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)
