"""Approvals as the API shows them to their clients (in answers and in webhooks)."""

from __future__ import annotations

from typing import Any

from agent_runtime import Approval, ApprovalStatus
from bot.api.tools import client_tool


def view(approval: Approval) -> dict[str, Any]:
    """Return the approval as the API shows it to its client."""
    return {
        "id": approval.id,
        "run_id": approval.run_id,
        "tool": client_tool(approval.tool),
        "arguments": approval.args,
        "args_hash": approval.args_hash,
        "status": approval.status.value,
        "deadline": approval.deadline.isoformat(),
        "approver": None if approval.decided_by is None else approval.decided_by.to_json(),
        "decided_at": None if approval.decided_at is None else approval.decided_at.isoformat(),
        "approved_arguments": approval.decided_args
        if approval.status == ApprovalStatus.APPROVED
        else None,
        "approved_args_hash": approval.decided_args_hash
        if approval.status == ApprovalStatus.APPROVED
        else None,
        "reason": approval.reason,
    }
