"""The run's live status line on its root message, rendered from committed state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_runtime import Approval, Run, RunStatus
from agent_runtime.approvals import ApprovalKind, local_people
from agent_runtime.step_names import is_budget_key
from bot.slack.budget_blocks import ended_line
from bot.slack.text import shown, tool_name, truncate, user, visible

ANSWER_SHOWN = 1500
"""The characters of a final answer the root message shows (the thread has all of it)."""
STATUS_LIMIT = 150
"""The characters of a thread status (Slack shows one short line)."""


def status_line(run: Run, pending: Sequence[Approval], approved: Sequence[Approval] = ()) -> str:
    """One line saying where ``run`` is: running, waiting for whom, or how it ended.

    ``approved`` are the run's approved calls that have not run yet: one that waits for an
    earlier call of its model turn to be decided (calls run in the model's order) says so.
    """
    if run.status == RunStatus.COMPLETED:
        return _completed(run.output)
    if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
        icon = "❌" if run.status == RunStatus.FAILED else "🛑"
        reason = f": {shown(run.error.message, 300)}" if run.error else ""
        return f"{icon} *{run.status.value.capitalize()}*{reason}"
    if pending:
        return (
            "⏳ *Waiting* for "
            + "; ".join(_sign_off(a) for a in pending)
            + _queued(pending, approved)
        )
    if run.status == RunStatus.WAITING and is_budget_key(run.wait_key):
        return "💸 *Waiting* for an approver to raise the budget or end the run"
    if run.status == RunStatus.WAITING and run.wait_key is None:
        return "⏳ *Waiting* until a set time"
    return "🔄 *Running*"


def _completed(output: Any) -> str:
    found = output if isinstance(output, dict) else {}
    if found.get("ended"):
        return f"🛑 *{ended_line(found)}*"
    answer = found.get("answer") if "answer" in found else output
    return f"✅ *Completed:* {shown(str(answer), ANSWER_SHOWN)}"


def _queued(pending: Sequence[Approval], approved: Sequence[Approval]) -> str:
    first = min(a.position for a in pending)
    held = [a for a in approved if a.consumed_by is None and a.position > first]
    if not held:
        return ""
    names = ", ".join(f"*{tool_name(a.tool)}*" for a in held)
    return f" · {names} approved, runs once the calls before it are decided"


def _sign_off(approval: Approval) -> str:
    deciders = local_people(approval.eligible, approval.requester)
    people = " or ".join(user(u) for u in deciders) or "an approver"
    if approval.kind == ApprovalKind.BUDGET:
        return f"{people} to raise the budget or end the run"
    return f"{people}'s sign-off on *{tool_name(approval.tool)}*"


def thread_status(run: Run, pending: Sequence[Approval]) -> str:
    """What Slack shows under the run's thread, after the app's name, while the run waits for
    people ("" once it does not: that clears it).

    Plain text: Slack renders no mentions there, and without ``users:read`` the bot knows
    approvers by their ids only, so it names the calls, not the people.
    """
    if run.status != RunStatus.WAITING:
        return ""
    budget = any(a.kind == ApprovalKind.BUDGET for a in pending)
    if budget or is_budget_key(run.wait_key):
        return "is waiting for an approver to raise the budget or end the run"
    if pending:
        tools = ", ".join(dict.fromkeys(visible(a.tool) for a in pending))
        return truncate(f"is waiting for a sign-off on {tools}", STATUS_LIMIT)
    return ""
