"""Block Kit for runs and approvals: pure functions from committed state to Slack messages."""

from __future__ import annotations

import json
from typing import Any

from agent_runtime import Approval, ApprovalStatus
from agent_runtime.approvals import ApprovalKind, local_people
from agent_runtime.rule_decisions import AUTOMATIC_ACTOR_PREFIXES
from bot.slack.preview_blocks import preview_blocks, preview_hides
from bot.slack.text import (
    SECTION_LIMIT,
    chunks,
    date,
    escape,
    has_hidden,
    message,
    shown,
    tool_name,
    truncate,
    user,
    visible,
)

Block = dict[str, Any]

APPROVE, REJECT, EDIT, VIEW_ARGS, WHY, HISTORY, FORK = (
    "approval.approve",
    "approval.reject",
    "approval.edit",
    "approval.view_args",
    "approval.why",
    "run.history",
    "run.fork",
)
GRANT_RUN, GRANT_DAY = "grant.run", "grant.day"
HISTORY_FORKS = 20
"""The most recent model calls a history offers to fork from (Slack allows 50 blocks)."""
ARGS_PREVIEW = 1500
MODAL_BLOCKS = 100
PLAIN_TEXT_INPUT_LIMIT = 3000
EDITED_FIELDS = 10
"""The edited fields a decision line names before summing up the rest."""
HIDDEN_NOTE = (
    "⚠️ This card contains invisible or direction-changing characters; they are "
    "shown as `\\u…` escapes. Read the arguments as escaped before deciding."
)
ICONS = {
    ApprovalStatus.APPROVED: "✅",
    ApprovalStatus.REJECTED: "❌",
    ApprovalStatus.EXPIRED: "⌛",
    ApprovalStatus.CANCELLED: "🛑",
    ApprovalStatus.SUPERSEDED: "🔁",
}


def plain(text: str, limit: int = 150) -> dict[str, Any]:
    """A plain_text object (shown literally by Slack, hidden characters as escapes)."""
    return {"type": "plain_text", "text": truncate(visible(text), limit), "emoji": True}


def mrkdwn(text: str) -> dict[str, Any]:
    """A mrkdwn text object; callers escape what is untrusted."""
    return {"type": "mrkdwn", "text": truncate(text, SECTION_LIMIT)}


def section(text: str) -> Block:
    """A section block of mrkdwn."""
    return {"type": "section", "text": mrkdwn(text)}


def context(text: str) -> Block:
    """A context block of mrkdwn."""
    return {"type": "context", "elements": [mrkdwn(text)]}


def preformatted(text: str, limit: int = SECTION_LIMIT) -> Block:
    """A rich_text_preformatted block: text shown as written (hidden characters as escapes),
    never parsed as markup."""
    shown_text = truncate(visible(text[: limit + 1]), limit)
    return {
        "type": "rich_text",
        "elements": [
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": shown_text}]}
        ],
    }


def canonical(args: Any) -> str:
    """Arguments as the canonical JSON that was hashed, indented for reading."""
    return json.dumps(args, sort_keys=True, indent=2, ensure_ascii=False)


def compact(args: Any) -> str:
    """Arguments as canonical JSON without spaces, for when the indented form is too long."""
    return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def run_root(
    run_id: str,
    task: str,
    requester: str,
    agent: str,
    fork: dict[str, Any] | None = None,
    *,
    status: str | None = None,
) -> tuple[str, list[Block]]:
    """The run's root message: the task, who asked, its status (already mrkdwn), the run id
    and what it was forked from."""
    name = tool_name(agent)
    text = f"{user(requester)} started a run of {name}: {shown(task, 500)}" + (
        f"\n{status}" if status else ""
    )
    origin = "" if fork is None else f" · fork of `{fork['from']}` from step {fork['at']}"
    blocks = [
        section(f"*Task* from {user(requester)}\n{shown(task, 2800)}"),
        *([section(status)] if status else []),
        context(f"run `{run_id}` · agent {name}{origin} · history in this thread"),
        {
            "type": "actions",
            "block_id": f"run:{run_id}",
            "elements": [button("History", HISTORY, run_id)],
        },
    ]
    return message(text), blocks


def history_blocks(run_id: str, header: str, lines: list[tuple[str, int | None]]) -> list[Block]:
    """A run's timeline; a line with a position gets a "Fork from here" button."""
    forkable = [p for _, p in lines if p is not None][-HISTORY_FORKS:]
    blocks: list[Block] = [section(header)]
    plain_lines: list[str] = []
    for text, position in lines:
        if position not in forkable:
            plain_lines.append(text)
            continue
        if plain_lines:
            blocks.append(section("\n".join(plain_lines)))
            plain_lines = []
        blocks.append(
            section(text)
            | {
                "block_id": f"fork:{position}",
                "accessory": button("Fork from here", FORK, f"{run_id}:{position}"),
            }
        )
    if plain_lines:
        blocks.append(section("\n".join(plain_lines)))
    return blocks


def approval_ref(approval: Approval) -> str:
    """What a card's Approve button and the edit modal carry: the approval and the hash of
    the arguments they show, so a decision counts only for what the person saw."""
    return f"{approval.id}:{approval.proposed_hash}"


def parse_approval_ref(value: str) -> tuple[str, str | None]:
    """Return the approval id and the shown arguments' hash (None if the value has none)."""
    approval, _, digest = value.partition(":")
    return approval, digest or None


def approval_card(approval: Approval) -> tuple[str, list[Block]]:
    """The card asking for a decision, or showing the decision once taken.

    A pending card shows the arguments an approval would now count for: after an edit,
    the edited ones, with who edited what and the votes cast on them. When the tool says
    what the call would do (its preview), that comes first and the raw arguments are
    behind "View arguments".
    """
    if approval.status != ApprovalStatus.PENDING:
        return decided_card(approval)
    arguments = canonical(approval.proposed_args)
    previewed = preview_blocks(approval)
    too_long = bool(previewed) or _fitting(arguments, ARGS_PREVIEW) is None
    title = (
        "Did this happen?"
        if approval.kind == ApprovalKind.OUTCOME
        else f"Approval needed: {approval.tool}"
    )
    blocks: list[Block] = [
        {"type": "header", "text": plain(title)},
        section(_facts(approval)),
        *(previewed or [preformatted(arguments, ARGS_PREVIEW)]),
    ]
    if approval.reason_asked:
        blocks.insert(2, section(shown(approval.reason_asked, SECTION_LIMIT)))
    progress = _progress(approval)
    if progress:
        blocks.insert(2, context(progress))
    if _hides(approval, approval.proposed_args):
        blocks.insert(1, context(HIDDEN_NOTE))
    buttons = [
        button(
            "Approve" if approval.kind == ApprovalKind.TOOL_CALL else "Yes, it did",
            APPROVE,
            approval_ref(approval),
            style="primary",
        ),
        button(
            "Reject" if approval.kind == ApprovalKind.TOOL_CALL else "No, run it",
            REJECT,
            approval.id,
            style="danger",
        ),
    ]
    if approval.kind == ApprovalKind.TOOL_CALL:
        buttons.append(button("Edit", EDIT, approval.id))
        buttons += _grant_buttons(approval)
    if too_long:
        label = "View arguments" if previewed else "View full arguments"
        buttons.append(button(label, VIEW_ARGS, approval.id))
    buttons.append(button("Why?", WHY, approval.id))
    blocks.append({"type": "actions", "block_id": f"approval:{approval.id}", "elements": buttons})
    asker = user(approval.requester.user_id)
    return message(f"Approval needed: {tool_name(approval.tool)} (requested by {asker})"), blocks


def decided_card(approval: Approval) -> tuple[str, list[Block]]:
    """The card after the decision: who, when, which arguments (by hash), why; no buttons."""
    line = decision_line(approval)
    args = approval.decided_args or approval.args
    blocks: list[Block] = [
        section(f"*{tool_name(approval.tool)}* · {line}"),
        *preview_blocks(approval),
        preformatted(canonical(args), ARGS_PREVIEW),
        context(f"requested by {user(approval.requester.user_id)} · approval `{approval.id}`"),
    ]
    if _hides(approval, args):
        blocks.insert(1, context(HIDDEN_NOTE))
    return message(f"{tool_name(approval.tool)}: {line}"), blocks


def decision_line(approval: Approval) -> str:
    """One line: the decision, who made it, when, the args hash, and the reason."""
    icon = ICONS.get(approval.status, "⏳")
    when = f" at {date(approval.decided_at)}" if approval.decided_at else ""
    digest = approval.decided_args_hash or approval.args_hash
    text = f"{icon} {_verdict(approval)}{when} (args sha256 {digest[:4]}…)"
    if approval.diff:
        text += " · edited: " + _fields(approval.diff)
    if approval.reason:
        text += f" · “{shown(approval.reason, 500)}”"
    return text


def _verdict(approval: Approval) -> str:
    """What happened and who did it: "Approved by @dana", "Approved, decided by rule:small",
    "Closed: run cancelled"."""
    if approval.decided_by is None:
        cancelled = approval.status == ApprovalStatus.CANCELLED
        return "Closed: run cancelled" if cancelled else approval.status.value.capitalize()
    by = approval.decided_by.user_id
    if approval.status == ApprovalStatus.SUPERSEDED:
        return f"Superseded (approved by {user(by)}, not run)"
    if by.startswith(AUTOMATIC_ACTOR_PREFIXES):
        return f"{approval.status.value.capitalize()}, decided by {escape(by)}"
    return f"{approval.status.value.capitalize()} by {user(by)}"


def _fields(diff: list[dict[str, Any]]) -> str:
    """The edited fields' names, the first few of them, and how many more."""
    names = ", ".join(shown(str(d["field"]), 40) for d in diff[:EDITED_FIELDS])
    more = len(diff) - EDITED_FIELDS
    return names + (f" and {more} more" if more > 0 else "")


def reject_modal(approval_id: str) -> dict[str, Any]:
    """The modal asking for a rejection reason."""
    return {
        "type": "modal",
        "callback_id": "approval.reject_submit",
        "private_metadata": approval_id,
        "title": plain("Reject", 24),
        "submit": plain("Reject", 24),
        "close": plain("Cancel", 24),
        "blocks": [
            {
                "type": "input",
                "block_id": "reason",
                "label": plain("Why? The agent reads this."),
                "element": {
                    "type": "plain_text_input",
                    "action_id": "value",
                    "multiline": True,
                    "max_length": PLAIN_TEXT_INPUT_LIMIT,
                },
            }
        ],
    }


def edit_modal(approval: Approval) -> dict[str, Any]:
    """The modal for editing arguments before approving (it remembers which it showed)."""
    current, note = editable(approval.proposed_args)
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": "value",
        "multiline": True,
        "max_length": PLAIN_TEXT_INPUT_LIMIT,
    }
    if current is not None:
        element["initial_value"] = current
    return {
        "type": "modal",
        "callback_id": "approval.edit_submit",
        "private_metadata": approval_ref(approval),
        "title": plain("Edit and approve", 24),
        "submit": plain("Approve", 24),
        "close": plain("Cancel", 24),
        "blocks": [
            section(f"Edit the arguments of *{tool_name(approval.tool)}* (JSON).{note}"),
            {"type": "input", "block_id": "args", "label": plain("Arguments"), "element": element},
        ],
    }


def args_modal(approval: Approval) -> dict[str, Any]:
    """A read-only modal with the full arguments, split to fit Block Kit's limits."""
    pieces = chunks(visible(canonical(approval.proposed_args)), SECTION_LIMIT - 100)
    blocks = [preformatted(piece) for piece in pieces[: MODAL_BLOCKS - 1]]
    if len(pieces) >= MODAL_BLOCKS:
        blocks.append(context("(truncated: the arguments are longer than a modal can show)"))
    return {
        "type": "modal",
        "title": plain("Arguments", 24),
        "close": plain("Close", 24),
        "blocks": blocks,
    }


def editable(args: dict[str, Any]) -> tuple[str | None, str]:
    """The arguments as the edit box can hold them (JSON escapes for hidden characters),
    or None; and a note saying how they are shown, or what to do when they do not fit."""
    indented = _fitting(canonical(args), PLAIN_TEXT_INPUT_LIMIT)
    if indented is not None:
        return indented, ""
    short = _fitting(compact(args), PLAIN_TEXT_INPUT_LIMIT)
    if short is not None:
        return short, "\nShown as compact JSON: indented, they would not fit the edit box."
    size = len(compact(args))
    return None, (
        f"\nThe arguments are too long to edit here ({size:,} characters; the "
        f"box holds {PLAIN_TEXT_INPUT_LIMIT:,}). Read them with *View full arguments*, "
        "then approve them on the card as they are, or *Reject* with a reason asking "
        "the agent for shorter arguments."
    )


def _fitting(text: str, limit: int) -> str | None:
    """``text`` with hidden characters as escapes, or None if that is over ``limit``."""
    # escapes never shorten, so text over the limit is never made visible in full
    shown_text = visible(text) if len(text) <= limit else None
    return shown_text if shown_text is not None and len(shown_text) <= limit else None


def _hides(approval: Approval, args: dict[str, Any]) -> bool:
    """Tell whether the tool name, question, arguments or preview hold hidden characters."""
    return has_hidden(approval.tool + approval.reason_asked + canonical(args)) or preview_hides(
        approval
    )


def _facts(approval: Approval) -> str:
    deciders = local_people(approval.eligible, approval.requester)
    approvers = ", ".join(user(u) for u in deciders) or "nobody"
    escalated = " (escalated)" if approval.escalated else ""
    return (
        f"*Requested by* {user(approval.requester.user_id)} · "
        f"*Approvers*{escalated} {approvers}\n"
        f"*Deadline* {date(approval.deadline)} · "
        f"*Arguments* sha256 `{approval.proposed_hash[:12]}`"
    )


def _progress(approval: Approval) -> str:
    """Who edited the arguments (votes on the old ones no longer count) and who approved."""
    parts = []
    if approval.diff:
        fields = _fields(approval.diff)
        parts.append(f"✏️ Edited ({fields}); earlier approvals were reset")
    if approval.approvals:
        needed = approval.policy.required
        who = ", ".join(user(v["user_id"]) for v in approval.approvals)
        parts.append(f"Approved by {who} ({len(approval.approvals)} of {needed})")
    return " · ".join(parts)


def _grant_buttons(approval: Approval) -> list[Block]:
    """Approve and allow similar calls (for the run, or for 24 h): not where one approval
    is not enough."""
    if approval.policy.required != 1:
        return []
    ref = approval_ref(approval)
    return [
        button("Approve + allow similar in this run", GRANT_RUN, ref),
        button("Allow similar for 24 h…", GRANT_DAY, ref),
    ]


def button(text: str, action_id: str, value: str, *, style: str | None = None) -> Block:
    """A button whose click carries ``value``."""
    element: Block = {
        "type": "button",
        "text": plain(text, 75),
        "action_id": action_id,
        "value": value,
    }
    if style:
        element["style"] = style
    return element
