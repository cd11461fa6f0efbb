"""Reading a gateway run's calls back from its journal, and which a reconnecting client may
be retrying."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from agent_runtime import StepKind, StepRecord
from bot.mcp.calls import Call, lost_answer, read_calls, unanswered

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _entry(position: int, name: str, output: dict[str, Any]) -> StepRecord:
    return StepRecord(
        position=position,
        kind=StepKind.STEP,
        name=name,
        input_hash="0",
        output=output,
        started_at=T0,
        finished_at=T0,
    )


def _call(position: int, tool: str, *, read_only: bool = False) -> StepRecord:
    return _entry(
        position,
        f"mcp.call:{tool}",
        {
            "tool": tool,
            "args": {"n": position},
            "args_hash": f"h{position}",
            "gated": not read_only,
            "definition": "d",
            "read_only": read_only,
        },
    )


def _answer(position: int, call: int, tool: str) -> StepRecord:
    return _entry(position, f"tool:{tool}", {"call": call, "result": {"content": []}})


def test_entries_are_grouped_by_the_call_they_name() -> None:
    """Interleaved entries of concurrent calls belong to the call whose position they name."""
    calls = read_calls(
        [
            _call(0, "wipe"),
            _call(1, "wipe"),
            _entry(2, "approval.request:wipe", {"call": 1, "approval_id": "a1"}),
            _entry(3, "approval.request:wipe", {"call": 0, "approval_id": "a0"}),
            _answer(4, 1, "wipe"),
        ]
    )
    assert [(c.position, c.approval_id, c.result is not None) for c in calls] == [
        (0, "a0", False),
        (1, "a1", True),
    ]


def test_unanswered_calls_and_the_last_side_effect_may_be_retried() -> None:
    """Calls left unanswered may be retried, and so may the last call if it had a side
    effect (its answer may be lost); an earlier answered call may not, nor a last read."""
    journal = [
        _call(0, "wipe"),
        _answer(1, 0, "wipe"),
        _call(2, "wipe"),
        _call(3, "wipe"),
        _answer(4, 3, "wipe"),
    ]
    calls = read_calls(journal)
    assert [c.position for c in unanswered(calls)] == [2]
    lost = lost_answer(calls)
    assert lost is not None
    assert lost.position == 3
    journal += [_call(5, "read", read_only=True), _answer(6, 5, "read")]
    assert lost_answer(read_calls(journal)) is None


def test_a_retry_matches_on_tool_and_arguments() -> None:
    """The same tool with the same arguments' hash is the same call; anything else is not."""
    [call] = read_calls([_call(0, "wipe")])
    assert isinstance(call, Call)
    assert call.matches("wipe", "h0")
    assert not call.matches("wipe", "h1")
    assert not call.matches("read", "h0")
