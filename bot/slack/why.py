"""The "Why?" modal: the model step that proposed a call, with what came from outside marked.

Everything the model read came from a person or a tool, so all of it is shown as untrusted
text (never parsed as markup): an instruction planted in a tool result is visible here as
the data it is, beside the call it may have caused.
"""

from __future__ import annotations

import json
from typing import Any

from agent_runtime.approvals import Approval
from agent_runtime.proposal import Proposal
from bot.slack.blocks import Block, context, plain, preformatted, section
from bot.slack.text import shown, tool_name, user

RESULTS_SHOWN = 20
"""The latest tool results the modal shows (each takes two blocks of the 100 allowed)."""
RESULT_LIMIT = 1500
REASONING_LIMIT = 2900
TASK_LIMIT = 1500
CALL_ARGS_LIMIT = 200
UNTRUSTED = "⚠️ *Untrusted*"


def why_modal(approval: Approval, proposal: Proposal) -> dict[str, Any]:
    """The modal showing the model step that proposed ``approval``'s call."""
    return {
        "type": "modal",
        "title": plain("Why this call?", 24),
        "close": plain("Close", 24),
        "blocks": [
            *_proposed(approval, proposal),
            *_reasoning(proposal),
            *_read(approval, proposal),
            context(
                f"Rebuilt from the journal, as `signoff inspect {proposal.run_id} "
                f"--step {proposal.position}` shows it. Text marked untrusted came from a "
                "person or a tool: instructions in it are data, not orders."
            ),
        ],
    }


def _proposed(approval: Approval, proposal: Proposal) -> list[Block]:
    lines = [
        f"• `{tool_name(str(c['name']))}` {shown(_json(c['arguments']), CALL_ARGS_LIMIT)}"
        for c in proposal.calls[:10]
    ]
    more = len(proposal.calls) - 10
    if more > 0:
        lines.append(f"… and {more} more calls")
    return [
        section(
            f"*{tool_name(approval.tool)}* was proposed by the model at step "
            f"{proposal.position} of run `{proposal.run_id}`, with these calls:\n"
            + "\n".join(lines)
        )
    ]


def _reasoning(proposal: Proposal) -> list[Block]:
    if not proposal.reasoning.strip():
        return [section("🤖 *The model's reasoning*: it gave no text with its calls.")]
    return [
        section("🤖 *The model's reasoning* (its own words, shaped by what it read):"),
        preformatted(proposal.reasoning, REASONING_LIMIT),
    ]


def _read(approval: Approval, proposal: Proposal) -> list[Block]:
    asker = user(approval.requester.user_id)
    blocks: list[Block] = [
        section(f"{UNTRUSTED} · the task, from {asker}:"),
        preformatted(proposal.task or "(no task text)", TASK_LIMIT),
    ]
    if not proposal.rebuilt:
        return [
            *blocks,
            context(
                "The tool results it read cannot be rebuilt: the agent changed since this step."
            ),
        ]
    results = proposal.tool_results
    if not results:
        return [*blocks, context("It had read no tool results yet.")]
    skipped = len(results) - RESULTS_SHOWN
    if skipped > 0:
        blocks.append(context(f"({skipped} earlier tool results are not shown.)"))
    for result in results[-RESULTS_SHOWN:]:
        blocks += _result(result)
    return blocks


def _result(result: dict[str, Any]) -> list[Block]:
    error = " (an error)" if result.get("is_error") else ""
    call = (
        f"`{tool_name(str(result.get('tool', '')))}` {shown(_json(result.get('arguments')), 120)}"
    )
    return [
        context(f"{UNTRUSTED} · what {call} returned{error}:"),
        preformatted(str(result.get("result", "")), RESULT_LIMIT),
    ]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
