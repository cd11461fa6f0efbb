"""The ``/agent`` slash command: parsing its text into a typed command."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_runtime import RunId, UserError, parse_run_id

HELP = """*Signoff* runs an agent on your task; anything irreversible waits for an approver.
• `/agent &lt;task&gt;` or `/agent run &lt;task&gt;` — start a run (its history goes in a thread)
• `/agent status [RUN]` — a run's status (or your latest run's)
• `/agent history RUN` — a compact timeline of the run
• `/agent list` — recent runs in this channel
• `/agent cancel RUN` — cancel a run
• `/agent pending` — approvals waiting on you
• `/agent help` — this message"""

MAX_TASK_CHARS = 3000


@dataclass(frozen=True, slots=True)
class StartRun:
    """``/agent <task>`` or ``/agent run <task>``: start a run on ``task``."""

    task: str


@dataclass(frozen=True, slots=True)
class ShowStatus:
    """``/agent status [RUN]``: a run's status (None: the person's latest run)."""

    run_id: RunId | None = None


@dataclass(frozen=True, slots=True)
class ShowHistory:
    """``/agent history RUN``: a compact timeline of the run."""

    run_id: RunId


@dataclass(frozen=True, slots=True)
class CancelRun:
    """``/agent cancel RUN``: cancel the run."""

    run_id: RunId


@dataclass(frozen=True, slots=True)
class ListRuns:
    """``/agent list``: recent runs in this channel."""


@dataclass(frozen=True, slots=True)
class ListPending:
    """``/agent pending``: approvals waiting on the person."""


@dataclass(frozen=True, slots=True)
class ShowHelp:
    """``/agent help``: what the command can do."""


Command = StartRun | ShowStatus | ShowHistory | CancelRun | ListRuns | ListPending | ShowHelp
"""A parsed ``/agent`` command."""


class BadCommand(UserError):
    """The command text cannot be understood; the message says how to fix it."""


def parse(text: str) -> Command:
    """Parse the text after ``/agent``."""
    text = text.strip()
    if not text:
        raise BadCommand(
            "Tell me what to do, e.g. `/agent refund order 1042`. `/agent help` lists the commands."
        )
    word, rest = [*text.split(maxsplit=1), ""][:2]
    match word.lower():
        case "run":
            return _run(rest)
        case "list":
            return ListRuns()
        case "pending":
            return ListPending()
        case "help":
            return ShowHelp()
        case "status":
            return ShowStatus(_run_id(rest, "status") if rest.strip() else None)
        case "history":
            return ShowHistory(_run_id(rest, "history"))
        case "cancel":
            return CancelRun(_run_id(rest, "cancel"))
        case _:
            return _run(text)


def _run(task: str) -> StartRun:
    task = task.strip()
    if not task:
        raise BadCommand("The task is empty: `/agent run &lt;task&gt;`.")
    if len(task) > MAX_TASK_CHARS:
        raise BadCommand(f"The task is longer than {MAX_TASK_CHARS} characters.")
    return StartRun(task)


def _run_id(text: str, name: str) -> RunId:
    token = text.strip().strip("`")
    if not re.fullmatch(r"[0-9a-fA-F-]{32,36}", token):
        raise BadCommand(
            f"`/agent {name}` needs a run id, e.g. `/agent {name} 3f9a…`. "
            f"To start a run with this text, use `/agent run {name} …`."
        )
    try:
        return parse_run_id(token)
    except ValueError:
        raise BadCommand(f"{token!r} is not a run id.") from None
