"""Every message and modal the bot renders passes slack_sdk's Block Kit models and limits.

Cards in every state, the modals, the root message, the history and the thread replies are
rendered from hostile input (50 KB arguments, mentions, ``<!channel>``, markdown, RTL and
zero-width characters, very long tool names) and checked the way Slack would check them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk.models.blocks import Block as SdkBlock
from slack_sdk.models.views import View

from agent_runtime import ApprovalStatus, RunId, RunStatus
from agent_runtime.approvals import Approval, ApprovalId, ApprovalKind
from agent_runtime.batches import BATCH_LIMIT
from agent_runtime.models import ToolCall, text_reply, tool_reply
from agent_runtime.policy import PolicySnapshot
from agent_runtime.previews import TABLE_ROWS, Preview
from agent_runtime.previews import TEXT_LIMIT as PREVIEW_LIMIT
from agent_runtime.proposal import Proposal, proposal
from agent_runtime.records import ErrorInfo, StepKind, StepRecord
from agent_runtime.side_effects import PREVIEW_CHANGED
from agent_runtime.testing import InMemoryStore
from bot.slack import blocks
from bot.slack.batch_blocks import batch_card, reject_all_modal
from bot.slack.notifier import REPLY, SlackNotifier, describe_step
from bot.slack.run_status import status_line
from bot.slack.text import TEXT_LIMIT, escape
from bot.slack.views import history_message
from bot.slack.why import why_modal
from tests.unit.agent_harness import AgentHarness
from tests.unit.slack_fixtures import (
    HIDDEN,
    HOSTILE,
    LONG_NAME,
    OMAR,
    SPOOF,
    approval,
    decided,
    edited,
    hidden_in,
    strings,
)

MESSAGE_BLOCKS, MODAL_BLOCKS = 50, 100
HOSTILE_CELL = ("<!channel> *x* " + SPOOF + HIDDEN + "&" * 3000)[:PREVIEW_LIMIT]
HOSTILE_PREVIEW = Preview(text=HOSTILE_CELL, table=((HOSTILE_CELL, HOSTILE_CELL),) * TABLE_ROWS)
"""The largest preview a tool may give, of live data that mentions, links and hides."""
NAMES = {
    "plain name": "issue_refund",
    "long name": LONG_NAME,
    "hostile name": "<!channel>*x*" + HIDDEN + SPOOF * 300,
}
AT = datetime(2026, 3, 1, 10, tzinfo=UTC)
TASK = "<!channel> *please* " + SPOOF + HIDDEN + "&" * 50_000


def card_states(tool: str) -> Iterator[tuple[str, Any]]:
    """Every state a card is rendered in, for a call of ``tool`` with hostile arguments."""
    asked = approval(tool, HOSTILE, reason_asked="<!here> " + SPOOF * 2000)
    voted = edited(asked, {**HOSTILE, "to": "<@U_EVIL>" + HIDDEN})
    why = "&<>" * 3000 + SPOOF
    yield "pending", asked
    yield "edited with votes", voted
    yield "approved", decided(voted, ApprovalStatus.APPROVED)
    yield "rejected", decided(asked, ApprovalStatus.REJECTED, reason=why)
    yield "expired", decided(asked, ApprovalStatus.EXPIRED, by=None, reason=why)
    yield "cancelled", decided(asked, ApprovalStatus.CANCELLED, by=OMAR, reason=why)
    yield "escalated", replace(asked, escalated=True)
    yield (
        "outcome question",
        approval(tool, HOSTILE, kind=ApprovalKind.OUTCOME, reason_asked="Did it happen? " + HIDDEN),
    )
    previewed = replace(asked, preview=HOSTILE_PREVIEW.to_json(), preview_digest="d" * 64)
    yield "previewed", previewed
    yield "previewed, edited", edited(previewed, {**HOSTILE, "amount_cents": 1})
    yield "preview failed", replace(asked, preview={"error": "<!here> " + SPOOF + HIDDEN * 300})
    yield "superseded", decided(previewed, ApprovalStatus.SUPERSEDED, reason=PREVIEW_CHANGED)


def steps(tool: str) -> list[StepRecord]:
    """Journal entries a thread reply or the history describes, with hostile content."""
    calls = [{"id": str(i), "name": tool, "arguments": HOSTILE} for i in range(60)]
    return [
        _step(0, "model", {"message": {"tool_calls": calls}}),
        _step(1, f"tool:{tool}", HOSTILE),
        _step(2, f"tool:{tool}", None, error=ErrorInfo(type="E", message=SPOOF * 900)),
        _step(3, "budget.exhausted", {"limit": HIDDEN * 900}),
        _step(4, f"tool.unknown_outcome:{tool}", {"strategy": "<!channel>" * 900}),
        _step(5, f"tool.started:{tool}", {"refused": SPOOF + HIDDEN * 900}),
    ]


def _step(position: int, name: str, output: Any, error: ErrorInfo | None = None) -> StepRecord:
    return StepRecord(
        position=position,
        kind=StepKind.STEP,
        name=name,
        input_hash="h",
        output=output,
        error=error,
        started_at=AT,
        finished_at=AT,
    )


def thread_replies(tool: str) -> Iterator[str]:
    """The texts the notifier posts in a run's thread, for hostile steps and decisions."""
    store = InMemoryStore()
    run = store.create_run(
        RunId("r1"),
        "agent:" + tool,
        {"task": TASK, "requester": {"user_id": "U_ALEX"}, "context": {"slack": {"channel": "C1"}}},
        AT,
    )
    notifier = SlackNotifier(store)
    for state, shown in card_states(tool):
        notices = [
            *notifier.approval_changed(shown, "reminded"),
            *notifier.approval_changed(shown, state),
        ]
        yield from (n.data["text"] for n in notices if n.kind == REPLY)
    for step in steps(tool):
        yield from (n.data["text"] for n in notifier.step_committed(run, step) if n.kind == REPLY)
    answer = {"answer": HOSTILE}
    for ended in (
        replace(run, status=RunStatus.COMPLETED, output=answer),
        replace(run, status=RunStatus.FAILED, error=ErrorInfo(type="E", message=TASK)),
    ):
        yield from (n.data["text"] for n in notifier.run_ended(ended) if n.kind == REPLY)


def hostile_run_history() -> tuple[str, list[blocks.Block]]:
    """The history of a run whose task, tool calls, results and answer are hostile."""
    harness = AgentHarness(
        [
            tool_reply(ToolCall(id="c1", name=LONG_NAME, arguments=HOSTILE)),
            tool_reply(ToolCall(id="c2", name="lookup_order", arguments={"order_id": SPOOF * 300})),
            text_reply("<!channel> " + HIDDEN + SPOOF * 2000),
        ]
    )
    run_id = harness.start("<!here> " + SPOOF * 300)
    for _ in range(3):
        harness.work()
    assert harness.run(run_id).status == RunStatus.COMPLETED
    return history_message(harness.runtime, run_id)


def messages() -> Iterator[tuple[str, str, list[blocks.Block] | None]]:
    """Every message the bot renders: (what, fallback text, blocks)."""
    for label, tool in NAMES.items():
        for state, shown in card_states(tool):
            yield (f"card {state}, {label}", *blocks.approval_card(shown))
        for i, text in enumerate(thread_replies(tool)):
            yield f"reply {i}, {label}", text, None
        lines: list[tuple[str, int | None]] = [
            (describe_step(s) or "", i) for i, s in enumerate(steps(tool) * 12)
        ]
        yield (
            f"history, {label}",
            "history",
            blocks.history_blocks("r1", "*History* " + escape(HIDDEN), lines),
        )
    yield ("history of a run", *hostile_run_history())
    for label, tool in NAMES.items():
        yield (f"batch, {label}", *batch_card(7, hostile_batch(tool)))
    yield ("root", *blocks.run_root("r1", TASK, "U_ALEX", LONG_NAME, fork={"from": "r0", "at": 3}))
    for i, status in enumerate(root_statuses()):
        yield (f"root status {i}", *blocks.run_root("r1", TASK, "U_ALEX", LONG_NAME, status=status))


def hostile_batch(tool: str) -> list[Approval]:
    """The largest batch, of hostile calls with many approvers each."""
    approvers = [f"U_{chr(65 + i % 26)}" for i in range(40)]
    return [
        replace(
            approval(tool, HOSTILE, id=ApprovalId(f"{i:024x}")),
            policy=PolicySnapshot(approvers=tuple(approvers)),
        )
        for i in range(BATCH_LIMIT)
    ]


def root_statuses() -> Iterator[str]:
    """The status lines of a run's root, for hostile tools, answers and errors."""
    run = InMemoryStore().create_run(RunId("r1"), "agent:x", {"task": TASK}, AT)
    for tool in NAMES.values():
        yield status_line(
            replace(run, status=RunStatus.WAITING),
            [shown for _, shown in card_states(tool)][:1] * 3,
        )
    yield status_line(replace(run, status=RunStatus.COMPLETED, output={"answer": HOSTILE}), [])
    yield status_line(
        replace(run, status=RunStatus.FAILED, error=ErrorInfo(type="E", message=TASK)), []
    )


def modals() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every modal the bot opens, for hostile approvals."""
    for label, tool in NAMES.items():
        for state, shown in card_states(tool):
            yield f"edit {state}, {label}", blocks.edit_modal(shown)
            yield f"args {state}, {label}", blocks.args_modal(shown)
    yield "reject", blocks.reject_modal(approval().id)
    yield "reject all", reject_all_modal([a.id for a in hostile_batch("x")])
    for label, tool in NAMES.items():
        for state, reasons in hostile_proposals(tool):
            yield f"why {state}, {label}", why_modal(approval(tool, HOSTILE), reasons)
    yield "why of a run", hostile_run_why()


def hostile_proposals(tool: str) -> Iterator[tuple[str, Proposal]]:
    """Proposals whose task, reasoning, calls and tool results are hostile and huge."""
    results = [
        {"tool": tool, "arguments": HOSTILE, "result": TASK, "is_error": i % 2 == 0}
        for i in range(60)
    ]
    full = Proposal(
        run_id="r1",
        position=4,
        reasoning="<!here> " + SPOOF * 2000 + HIDDEN,
        calls=[{"name": tool, "arguments": HOSTILE}] * 60,
        task=TASK,
        tool_results=results,
        rebuilt=True,
    )
    yield "full", full
    yield "silent", replace(full, reasoning="", calls=[], tool_results=[], task="")
    yield "not rebuilt", replace(full, tool_results=[], rebuilt=False)


def hostile_run_why() -> dict[str, Any]:
    """The Why? of a card in a run whose task and tool results are hostile."""
    harness = AgentHarness(
        [
            tool_reply(ToolCall(id="c1", name="lookup_order", arguments={"order_id": SPOOF})),
            tool_reply(
                ToolCall(
                    id="c2", name="issue_refund", arguments={"order_id": "1", "amount_cents": 1}
                ),
                text="<!channel> " + HIDDEN + SPOOF * 2000,
            ),
        ]
    )
    run_id = harness.start("<!here> " + SPOOF * 300 + HIDDEN)
    harness.work()
    [asked] = harness.env.pending(run_id)
    reasons = proposal(
        harness.agent,
        harness.approvals,
        harness.run(run_id),
        harness.runtime.journal(run_id),
        asked.position,
    )
    assert reasons.rebuilt
    assert reasons.tool_results
    return why_modal(asked, reasons)


MESSAGES = list(messages())
MODALS = list(modals())


@pytest.mark.parametrize(("what", "text", "body"), MESSAGES, ids=[m[0] for m in MESSAGES])
def test_every_message_passes_block_kit(
    what: str, text: str, body: list[blocks.Block] | None
) -> None:
    """Each message's blocks pass slack_sdk's models; text and block count fit Slack's limits."""
    assert len(text) <= TEXT_LIMIT, what
    for block in body or []:
        parsed = SdkBlock.parse(block)
        assert parsed is not None, block
        parsed.validate_json()
    assert len(body or []) <= MESSAGE_BLOCKS


@pytest.mark.parametrize(("what", "view"), MODALS, ids=[m[0] for m in MODALS])
def test_every_modal_passes_block_kit(what: str, view: dict[str, Any]) -> None:
    """Each modal passes slack_sdk's View model, and each of its blocks the Block models."""
    View(**view).validate_json()
    for block in view["blocks"]:
        parsed = SdkBlock.parse(block)
        assert parsed is not None, block
        parsed.validate_json()
    assert len(view["blocks"]) <= MODAL_BLOCKS


def test_no_payload_carries_a_hidden_character() -> None:
    """No text, block or modal shows an invisible or direction-changing character as-is."""
    assert hidden_in([list(m[1:]) for m in MESSAGES]) == []
    assert hidden_in([v for _, v in MODALS]) == []


def parsed_texts(value: Any) -> Iterator[str]:
    """The texts Slack parses as mrkdwn inside blocks or a view."""
    if isinstance(value, dict):
        if value.get("type") == "mrkdwn":
            yield value["text"]
        for item in value.values():
            yield from parsed_texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from parsed_texts(item)


def test_no_payload_carries_untrusted_markup() -> None:
    """The only ``<…>`` markup sent is the bot's own: mentions of known users and dates."""
    own = re.compile(r"^<(@U_[A-Z]+|!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>|]+)>$")
    texts = [
        *(m[1] for m in MESSAGES),
        *parsed_texts([m[2] for m in MESSAGES]),
        *parsed_texts([v for _, v in MODALS]),
    ]
    found = {m for s in texts for m in re.findall(r"<[^<>]*>", s) if not own.match(m)}
    assert found == set()


def test_no_cut_leaves_half_an_entity() -> None:
    """Shortened text never ends in a split entity such as ``&am…``."""
    cut = re.compile(r"&[a-z]{0,4}…")
    assert [s for s in strings([list(m[1:]) for m in MESSAGES]) if cut.search(s)] == []
    assert json.dumps([v for _, v in MODALS]).count("&am\u2026") == 0
