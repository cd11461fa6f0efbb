"""A model step's input hash: each message hashed once, and journals of the old format replay.

``fixtures/legacy_agent_journal.json`` was written by the engine before format 2 (a run
of two order look-ups, then an answer); it must replay with zero model calls.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import Agent, Lease, NonDeterminismError, Run, RunContext, RunId, RunStatus
from agent_runtime.agent_loop import agent_workflow, request_json
from agent_runtime.model_input import model_input, model_positions
from agent_runtime.models import Message, ModelRequest, ToolCall, text_reply, tool_reply
from agent_runtime.records import ErrorInfo, StepKind, StepRecord
from agent_runtime.request_digest import (
    ConversationDigest,
    is_chained,
    legacy_request_hash,
    request_hash,
)
from agent_runtime.serialization import input_hash
from tests.unit.agent_harness import AgentHarness

LEGACY = Path(__file__).parent / "fixtures" / "legacy_agent_journal.json"


def _legacy() -> tuple[Run, list[StepRecord]]:
    data = json.loads(LEGACY.read_text())
    at = datetime.fromisoformat(data["journal"][0]["started_at"])
    run = Run(
        id=RunId(data["run"]["id"]),
        workflow=data["run"]["workflow"],
        status=RunStatus.COMPLETED,
        input=data["run"]["input"],
        output=data["run"]["output"],
        created_at=at,
        updated_at=at,
        fence=1,
    )
    return run, [_step(s) for s in data["journal"]]


def _step(s: dict[str, Any]) -> StepRecord:
    return StepRecord(
        position=s["position"],
        kind=StepKind(s["kind"]),
        name=s["name"],
        input_hash=s["input_hash"],
        output=s["output"],
        error=None if s["error"] is None else ErrorInfo.from_json(s["error"]),
        attempts=s["attempts"],
        started_at=datetime.fromisoformat(s["started_at"]),
        finished_at=datetime.fromisoformat(s["finished_at"]),
    )


def _replay(
    h: AgentHarness, run: Run, journal: list[StepRecord], agent: Agent | None = None
) -> tuple[Any, RunContext]:
    context = RunContext(
        run=run,
        lease=Lease(run.id, "replayer", run.fence),
        journal=journal,
        store=h.store,
        clock=h.clock,
        stopping=threading.Event(),
    )
    output = agent_workflow(agent or h.agent, h.approvals)(context, run.input)
    context.check_complete()
    return output, context


def _lookups(count: int) -> list[Any]:
    replies = [
        tool_reply(ToolCall(id=f"c{i}", name="lookup_order", arguments={"order_id": str(i)}))
        for i in range(count)
    ]
    return [*replies, text_reply("done")]


def test_a_journal_of_the_old_format_replays_with_no_model_call() -> None:
    """A journal written before format 2 replays to its output with zero model calls."""
    run, journal = _legacy()
    model_hashes = [journal[p].input_hash for p in model_positions(journal)]
    assert len(model_hashes) == 3
    assert not any(map(is_chained, model_hashes))
    h = AgentHarness([])
    output, context = _replay(h, run, journal)
    assert output == run.output
    assert context.position == len(journal)
    assert h.model.calls == 0
    assert sum(h.calls.values()) == 0


def test_a_journal_of_the_old_format_still_detects_a_changed_request() -> None:
    """Replaying an old-format journal with another system prompt is a non-determinism error."""
    run, journal = _legacy()
    h = AgentHarness([])
    with pytest.raises(NonDeterminismError, match="model"):
        _replay(h, run, journal, replace(h.agent, system_prompt="be bold"))


def test_inspect_checks_each_model_input_in_its_recorded_format() -> None:
    """Inspect finds every model input identical, in an old journal as in a new one."""
    old_run, old_journal = _legacy()
    h = AgentHarness(_lookups(2))
    run_id = h.start("check orders 1042 and 1043")
    h.work()
    new_run, new_journal = h.run(run_id), h.runtime.journal(run_id)
    for run, journal, chained in ((old_run, old_journal, False), (new_run, new_journal, True)):
        for position in model_positions(journal):
            seen = model_input(h.agent, h.approvals, run, journal, position)
            assert seen.identical
            assert is_chained(seen.input_hash) == chained


def test_new_model_steps_are_hashed_in_format_2_and_replay() -> None:
    """A new run's model steps carry format-2 hashes and the run replays with no model call."""
    h = AgentHarness(_lookups(3))
    run_id = h.start()
    h.work()
    run, journal = h.run(run_id), h.runtime.journal(run_id)
    assert all(is_chained(journal[p].input_hash) for p in model_positions(journal))
    calls = h.model.calls
    output, _ = _replay(h, run, journal)
    assert output == run.output
    assert h.model.calls == calls


def _request(messages: list[Message], cap: int = 1024) -> dict[str, Any]:
    return request_json(
        ModelRequest(system="s", messages=tuple(messages), tools=(), max_output_tokens=cap)
    )


def _messages(count: int) -> list[Message]:
    return [Message(role="user", content=f"message {i}") for i in range(count)]


def test_the_chained_hash_covers_every_message_in_order_and_the_cap() -> None:
    """Changing, dropping, adding or reordering a message, or the cap, changes the hash."""
    messages = _messages(4)
    base = request_hash(_request(messages))
    variants = [
        [*messages[:2], Message(role="user", content="edited"), messages[3]],
        messages[:3],
        [*messages, Message(role="user", content="more")],
        [messages[1], messages[0], *messages[2:]],
    ]
    hashes = {request_hash(_request(v)) for v in variants} | {request_hash(_request(messages, 9))}
    assert len(hashes) == 5
    assert base not in hashes
    assert request_hash(_request(messages), like=base) == base
    assert request_hash(_request(messages), like="0123456789abcdef") == input_hash(
        [_request(messages)]
    )


def test_a_growing_conversation_hashes_like_the_whole_request() -> None:
    """The digest grown message by message equals the hash of the request taken whole."""
    messages = _messages(6)
    chain = ConversationDigest("s", [])
    for count in range(1, 7):
        chain.catch_up(messages[:count])
        assert chain.request_hash(1024) == request_hash(_request(messages[:count]))
    assert chain.length == 6
    assert legacy_request_hash(_request(messages)) != request_hash(_request(messages))


@pytest.fixture
def encodings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the JSON forms of messages made while the test runs."""
    counted = [0]
    to_json = Message.to_json

    def counting(self: Message) -> dict[str, Any]:
        counted[0] += 1
        return to_json(self)

    monkeypatch.setattr(Message, "to_json", counting)
    return counted


def test_replaying_a_long_conversation_encodes_each_message_a_bounded_number_of_times(
    encodings: list[int],
) -> None:
    """Replaying 20 turns encodes each message a few times, not once per later turn."""
    h = AgentHarness(_lookups(20))
    run_id = h.start()
    h.work()
    run, journal = h.run(run_id), h.runtime.journal(run_id)
    encodings[0] = 0
    output, _ = _replay(h, run, journal)
    assert output == run.output
    messages = 1 + 2 * 20 + 1
    assert encodings[0] <= 3 * messages, f"{encodings[0]} encodings of {messages} messages"
