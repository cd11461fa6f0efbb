"""Block Kit for an exhausted budget: the card in the run's thread and the raise modals.

The card shows what the run's budget approval asked (``agent_runtime.budget_ask``): the
spend of each model call, the limits and what is left, the projection, and "Raise by …" /
"End the run" for its approvers. "Raise by …" opens a modal with the amount (the proposed
raise filled in); a valid amount is shown again, as the new limit, before it is submitted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from agent_runtime import Approval, ApprovalStatus
from agent_runtime.approvals import ApprovalKind, local_people
from agent_runtime.budget_ask import LIMIT_KEYS
from bot.slack.blocks import (
    Block,
    approval_card,
    approval_ref,
    button,
    context,
    decision_line,
    plain,
    preformatted,
    section,
)
from bot.slack.text import date, message, shown, user

BUDGET_RAISE, BUDGET_END = "budget.raise", "budget.end"
AMOUNT_SUBMIT, CONFIRM_SUBMIT = "budget.amount_submit", "budget.confirm_submit"
AMOUNT_BLOCK = "amount"
UNITS = {
    "cost_usd": "cost (USD)",
    "tokens": "tokens",
    "model_calls": "model calls",
    "tool_calls": "tool calls",
    "wall_time_seconds": "wall time (seconds)",
}
"""How each limit (by its ``Budget.to_json`` name) is named to people."""
_END_CONFIRM = {
    "confirm": {
        "title": plain("End the run?", 100),
        "text": plain("The run is cancelled; its pending approvals are closed.", 300),
        "confirm": plain("End the run", 30),
        "deny": plain("Keep waiting", 30),
        "style": "danger",
    }
}


def amount(key: str, value: float) -> str:
    """A limit's value as people read it: dollars with cents (or four decimals below $1),
    whole numbers of tokens and calls, seconds."""
    if key == "cost_usd":
        return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"
    if key == "wall_time_seconds":
        return f"{value:,.0f} s"
    return f"{int(value):,}"


def limit_key(approval: Approval) -> str:
    """The ``Budget.to_json`` name of the limit the approval asks to raise."""
    return LIMIT_KEYS.get(str(approval.args.get("limit")), "cost_usd")


def budget_card(approval: Approval) -> tuple[str, list[Block]]:
    """The card of a budget approval: pending with its buttons, or decided."""
    asked = approval.args
    key = limit_key(approval)
    title = f"Budget used up: {UNITS[key]}"
    blocks: list[Block] = [
        {"type": "header", "text": plain(f"💸 {title}")},
        section(_facts(approval)),
        preformatted(spend_table(asked)),
        section(_limits(asked) + "\n" + _projection(approval, key)),
    ]
    text = f"{title} (run `{approval.run_id}`)"
    where = context(f"run `{approval.run_id}` · approval `{approval.id}`")
    if approval.status != ApprovalStatus.PENDING:
        blocks += [section(decided_line(approval)), where]
        return message(f"{text}: {decided_line(approval)}"), blocks
    blocks.append(where)
    ref = approval_ref(approval)
    blocks.append(
        {
            "type": "actions",
            "block_id": f"budget:{approval.id}",
            "elements": [
                button("Raise by …", BUDGET_RAISE, ref, style="primary"),
                button("End the run", BUDGET_END, ref, style="danger") | _END_CONFIRM,
            ],
        }
    )
    return message(f"{text}: an approver can raise it or end the run"), blocks


def decided_line(approval: Approval) -> str:
    """The decision: the raise (limits, who, when) or how the run ended."""
    raised = (approval.decided_args or {}).get("raise_to") or {}
    if approval.status == ApprovalStatus.APPROVED and isinstance(raised, dict):
        limits = ", ".join(f"{UNITS.get(k, k)} to {amount(k, v)}" for k, v in raised.items())
        return f"Raised {shown(limits, 300)} · {decision_line(approval)}"
    return decision_line(approval)


def ended_line(output: Mapping[str, Any]) -> str:
    """How a run's exhausted budget ended it, from its result: the raise expired, or who
    declined it and why (a run from before results said how: ended by a person)."""
    how = output.get("ended_by")
    found = how if isinstance(how, Mapping) else {}
    status, by = found.get("status"), found.get("by")
    at = _moment(found.get("at"))
    if status == "expired":
        return "Ended: the budget raise expired" + (f" at {date(at)}" if at else "")
    who = user(str(by["user_id"])) if isinstance(by, Mapping) and by.get("user_id") else None
    if who is None:
        return f"Ended by a person ({shown(str(output.get('ended')), 40)} budget)"
    reason = found.get("reason")
    why = f" ({shown(str(reason), 300)})" if reason else ""
    return f"Ended: {who} declined to raise the budget{why}"


def _moment(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def spend_table(asked: Mapping[str, Any]) -> str:
    """Each model call the run made (the latest ones if many), and the totals, as a table."""
    calls = [c for c in asked.get("calls") or [] if isinstance(c, dict)]
    used = asked.get("used") or {}
    rows = [("step", "model", "tokens in", "tokens out", "cost USD")]
    rows += [
        (
            str(c.get("position")),
            str(c.get("model"))[:24],
            f"{c.get('input_tokens', 0):,}",
            f"{c.get('output_tokens', 0):,}",
            f"{c.get('cost_usd', 0):.6f}",
        )
        for c in calls
    ]
    rows.append(
        (
            "",
            f"all {used.get('model_calls', 0)} calls",
            f"{used.get('input_tokens', 0):,}",
            f"{used.get('output_tokens', 0):,}",
            f"{used.get('cost_usd', 0):.6f}",
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i < 2 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


def amount_modal(approval: Approval) -> dict[str, Any]:
    """The modal asking by how much to raise, the proposed raise filled in."""
    key = limit_key(approval)
    current = _current(approval.args, key)
    proposed = (approval.proposed_args.get("raise_to") or {}).get(key, current)
    return {
        "type": "modal",
        "callback_id": AMOUNT_SUBMIT,
        "private_metadata": approval_ref(approval),
        "title": plain("Raise the budget", 24),
        "submit": plain("Next", 24),
        "close": plain("Cancel", 24),
        "blocks": [
            section(_limits(approval.args) + "\n" + _projection(approval, key)),
            {
                "type": "input",
                "block_id": AMOUNT_BLOCK,
                "label": plain(f"Raise {UNITS[key]} by"),
                "hint": plain(f"The limit is now {amount(key, current)}."),
                "element": {
                    "type": "plain_text_input",
                    "action_id": "value",
                    "initial_value": _number(proposed - current),
                    "max_length": 20,
                },
            },
        ],
    }


def confirm_modal(approval: Approval, raise_to: dict[str, Any], ref: str) -> dict[str, Any]:
    """The raise shown again, as the new limit, before it is submitted (``ref`` is the
    approval and the hash of the arguments the amount modal was opened on)."""
    key = limit_key(approval)
    current, new = _current(approval.args, key), raise_to[key]
    needed = approval.policy.required
    agree = "" if needed == 1 else f" once {needed} approvers agree on the same amount"
    return {
        "type": "modal",
        "callback_id": CONFIRM_SUBMIT,
        "private_metadata": json.dumps({"ref": ref, "raise_to": raise_to}),
        "title": plain("Confirm the raise", 24),
        "submit": plain("Raise", 24),
        "close": plain("Cancel", 24),
        "blocks": [
            section(
                f"Raise *{UNITS[key]}* from {amount(key, current)} to *{amount(key, new)}* "
                f"(+{amount(key, new - current)}) for run `{approval.run_id}`?"
            ),
            context(f"The run goes on{agree}; the raise is recorded in the audit log."),
        ],
    }


def outcome_modal(text: str) -> dict[str, Any]:
    """What became of a submitted raise, when it was not recorded."""
    return {
        "type": "modal",
        "title": plain("Raise not recorded", 24),
        "close": plain("Close", 24),
        "blocks": [section(text)],
    }


def parse_confirm(metadata: str) -> tuple[str, dict[str, Any]]:
    """Return the approval ref and the limits of a confirm modal's ``private_metadata``."""
    try:
        found = json.loads(metadata)
    except json.JSONDecodeError:
        return "", {}
    if not isinstance(found, dict) or not isinstance(found.get("raise_to"), dict):
        return "", {}
    return str(found.get("ref") or ""), found["raise_to"]


def _current(asked: Mapping[str, Any], key: str) -> float:
    value = (asked.get("budget") or {}).get(key) or 0
    return float(value)


def _number(value: float) -> str:
    """A number as typed: no exponent, no trailing zeros."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def _facts(approval: Approval) -> str:
    deciders = local_people(approval.eligible, approval.requester)
    approvers = ", ".join(user(u) for u in deciders) or "nobody"
    return (
        f"Run `{approval.run_id}` of {user(approval.requester.user_id)} stopped before its "
        f"next model call.\n*Approvers* {approvers} · *Deadline* {date(approval.deadline)}"
    )


def _limits(asked: Mapping[str, Any]) -> str:
    """Each limit, what was used of it and what is left."""
    budget, used, left = (asked.get(k) or {} for k in ("budget", "used", "left"))
    lines = []
    for key, value in budget.items():
        if key not in UNITS or not isinstance(value, int | float):
            continue
        spent = used.get(key)
        line = f"*{UNITS[key]}*: limit {amount(key, value)}"
        if isinstance(spent, int | float):
            line += f" · used {amount(key, spent)}"
        if isinstance(left.get(key), int | float):
            line += f" · left {amount(key, left[key])}"
        lines.append(line)
    return "\n".join(lines) or "No limits recorded."


def _projection(approval: Approval, key: str) -> str:
    """What the run's calls cost so far and would cost ahead, then the raise now on the
    table: the one proposed, or, once someone voted (quorum above one), the amount voted on
    and who voted for it."""
    ahead = approval.args.get("projection") or {}
    made, more = ahead.get("calls_so_far", 0), ahead.get("more_calls", 1)
    text = (
        f"*Projection*: {made} model calls averaged "
        f"{amount('cost_usd', ahead.get('cost_usd_per_call', 0))} and "
        f"{ahead.get('tokens_per_call', 0):,} tokens each; {more} more (as many as so far, "
        f"at most the turns left) would take about {amount('cost_usd', ahead.get('cost_usd', 0))} "
        f"and {ahead.get('tokens', 0):,} tokens."
    )
    proposed = (approval.proposed_args.get("raise_to") or {}).get(key)
    if not isinstance(proposed, int | float):
        return text
    if approval.status != ApprovalStatus.PENDING or not approval.approvals:
        return text + f" Proposed: raise {UNITS[key]} to {amount(key, proposed)}."
    needed = approval.policy.required
    who = ", ".join(user(v["user_id"]) for v in approval.approvals)
    return text + (
        f" *Voting on*: raise {UNITS[key]} to {amount(key, proposed)}, "
        f"approved by {who} ({len(approval.approvals)} of {needed})."
    )


def card_for(approval: Approval) -> tuple[str, list[Block]]:
    """The card of any approval: a budget approval's own, else a tool call's."""
    if approval.kind == ApprovalKind.BUDGET:
        return budget_card(approval)
    return approval_card(approval)
