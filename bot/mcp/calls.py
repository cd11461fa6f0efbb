"""The tool calls a gateway run has journaled, read back from its journal, and how a call
from the client is recognised as one of them retried.

Each call is a sequence of journal entries whose output names the call by the position
of its first entry: ``mcp.call`` (tool, arguments, whether gated), then for a gated call
``approval.request`` and ``approval.decision``, then ``tool.started`` (the idempotency
key, written before the upstream call) and ``tool`` (what the client was answered).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_runtime import StepRecord

CALL = "mcp.call"
REQUEST = "approval.request"
DECISION = "approval.decision"
STARTED = "tool.started"
RESULT = "tool"


@dataclass(slots=True, kw_only=True)
class Call:
    """One tool call of the run and how far it got."""

    position: int
    tool: str
    args: dict[str, Any]
    args_hash: str
    gated: bool
    definition: str
    """The digest of the tool's definition and policy when the call was made."""
    read_only: bool = False
    """The tool says it only reads (``readOnlyHint``): a retry of it may well be a new call."""
    entries: dict[str, Any] = field(default_factory=dict)

    @property
    def approval_id(self) -> str | None:
        """The id of the approval asked for this call, once asked."""
        request = self.entries.get(REQUEST)
        return None if request is None else str(request["approval_id"])

    @property
    def decision(self) -> dict[str, Any] | None:
        """The approval's decision as journaled (``Approval.summary``), once decided."""
        return self.entries.get(DECISION)

    @property
    def started(self) -> bool:
        """Tell whether the upstream call may have been made."""
        return STARTED in self.entries

    @property
    def result(self) -> dict[str, Any] | None:
        """What the client is answered (an MCP ``CallToolResult`` as JSON), once known."""
        found = self.entries.get(RESULT)
        return None if found is None else found["result"]

    def matches(self, tool: str, args_hash: str) -> bool:
        """Tell whether a call of ``tool`` with these arguments is this same call retried."""
        return self.tool == tool and self.args_hash == args_hash


def entry_name(kind: str, tool: str) -> str:
    """Return the journal name of a call's entry of ``kind`` for ``tool``."""
    return f"{kind}:{tool}"


def read_calls(journal: Sequence[StepRecord]) -> list[Call]:
    """Return the calls the journal holds, in the order they were made."""
    calls: dict[int, Call] = {}
    for record in journal:
        kind, _, _tool = record.name.partition(":")
        output = record.output if isinstance(record.output, dict) else {}
        if kind == CALL:
            calls[record.position] = Call(
                position=record.position,
                tool=output["tool"],
                args=output["args"],
                args_hash=output["args_hash"],
                gated=output["gated"],
                definition=output["definition"],
                read_only=output.get("read_only", False),
            )
        elif "call" in output and output["call"] in calls:
            calls[output["call"]].entries[kind] = output
    return list(calls.values())


def unanswered(calls: Sequence[Call]) -> list[Call]:
    """Return the calls whose client got no answer: a call of the same tool with the same
    arguments joins one of them instead of starting anew."""
    return [c for c in calls if c.result is None]


def lost_answer(calls: Sequence[Call]) -> Call | None:
    """Return the last call if it had a side effect and was answered: its answer may have
    been lost with the connection, so the first identical call of a new gateway gets it."""
    last = calls[-1] if calls else None
    return None if last is None or last.result is None or last.read_only else last
