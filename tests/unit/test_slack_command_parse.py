"""The ``/agent`` command text parses into one typed command per subcommand."""

from __future__ import annotations

import pytest

from agent_runtime import parse_run_id
from bot.slack.commands import (
    BadCommand,
    CancelRun,
    Command,
    ListPending,
    ListRuns,
    ShowHelp,
    ShowHistory,
    ShowStatus,
    StartRun,
    parse,
)

RUN = "3f9a0c1e-8b2d-4e6f-9a1b-2c3d4e5f6a7b"


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("refund order 1042", StartRun("refund order 1042")),
        ("  run   refund order 1042 ", StartRun("refund order 1042")),
        ("RUN status please", StartRun("status please")),
        ("statuses of orders", StartRun("statuses of orders")),
        ("status", ShowStatus(None)),
        (f"status `{RUN}`", ShowStatus(parse_run_id(RUN))),
        (f"history {RUN}", ShowHistory(parse_run_id(RUN))),
        (f"Cancel {RUN}", CancelRun(parse_run_id(RUN))),
        ("list", ListRuns()),
        ("pending anything", ListPending()),
        ("help", ShowHelp()),
    ],
)
def test_each_form_parses_to_its_command(text: str, command: Command) -> None:
    """A task (alone or after ``run``) starts a run; each subcommand is its own type,
    carrying the run id it names."""
    assert parse(text) == command


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "Tell me what to do"),
        ("run   ", "The task is empty"),
        ("history", "needs a run id"),
        ("cancel 1042", "To start a run with this text"),
        ("x" * 3001, "longer than 3000"),
    ],
)
def test_text_that_is_no_command_says_how_to_fix_it(text: str, says: str) -> None:
    """Empty text, an empty task, a subcommand missing its run id and an overlong task are
    refused with a message saying what to write."""
    with pytest.raises(BadCommand, match=says):
        parse(text)
