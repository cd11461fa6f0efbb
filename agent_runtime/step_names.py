"""The names of the steps and waits the runtime journals and reads back: one vocabulary.

History, the Slack thread, tracing, metrics, budgets, fork and replay recognise a journaled
step by its name, so every name is built here and recognised here. A name is part of the
journal: changing one would make journals already written unreadable.
"""

from __future__ import annotations

MODEL = "model"
"""A model call of the agent loop."""

BUDGET_EXHAUSTED = "budget.exhausted"
"""The agent loop found its budget used up and waits for a person to raise or end it."""

AS_DECIDED = "tools.as_decided"
"""The mark of a turn whose calls each run once decided, not after every decision."""

TOOL = "tool"
"""A tool's execution: ``tool:NAME``."""

TOOL_STARTED = "tool.started"
"""The record, before a side effect, that it is about to happen: ``tool.started:NAME``."""

TOOL_UNKNOWN_OUTCOME = "tool.unknown_outcome"
"""A side effect interrupted by a crash, outcome unknown: ``tool.unknown_outcome:NAME``."""

TOOL_VERIFY = "tool.verify"
"""The tool asked whether an interrupted side effect happened: ``tool.verify:NAME``."""

APPROVAL_REQUEST = "approval.request"
"""An approval asked for a call of a tool: ``approval.request:NAME``."""

APPROVAL_WAIT = "approval"
"""The wait key prefix of a run waiting for an approval's decision: ``approval:ID``."""

BUDGET_WAIT = "budget"
"""The wait key prefix of a run waiting for its exhausted budget: ``budget:N``."""

RESERVED_KEYS = (f"{APPROVAL_WAIT}:", f"{BUDGET_WAIT}:")
"""Wait key prefixes only the runtime delivers to; a plain signal may not use them."""


def of_tool(kind: str, tool: str) -> str:
    """Return the name of the ``kind`` step (``TOOL``, ``TOOL_STARTED``…) about ``tool``."""
    return f"{kind}:{tool}"


def tool_of(kind: str, name: str) -> str | None:
    """Return the tool a ``kind`` step called ``name`` is about; None if it is another step."""
    prefix = f"{kind}:"
    return name.removeprefix(prefix) if name.startswith(prefix) else None


def wake_key(approval: str) -> str:
    """Return the event key under which the waiting run receives the approval's decision."""
    return f"{APPROVAL_WAIT}:{approval}"


def approval_waited(key: str | None) -> str | None:
    """Return the approval a run waiting on ``key`` waits for; None if it waits for another."""
    prefix = f"{APPROVAL_WAIT}:"
    return key.removeprefix(prefix) if key and key.startswith(prefix) else None


def budget_key(wait: int) -> str:
    """Return the event key of the run's ``wait``-th wait for an exhausted budget."""
    return f"{BUDGET_WAIT}:{wait}"


def is_budget_key(key: str | None) -> bool:
    """Tell whether a run waiting on ``key`` waits for its exhausted budget."""
    return (key or "").startswith(f"{BUDGET_WAIT}:")
