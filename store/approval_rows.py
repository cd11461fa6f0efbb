"""An approval as a row of the ``approvals`` table, and back."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row

from agent_runtime.approvals import Actor, Approval, ApprovalKind, ApprovalStatus
from agent_runtime.policy import PolicySnapshot

CHANGING = (
    "deadline",
    "status",
    "votes",
    "decided_by",
    "decided_at",
    "decided_args",
    "decided_args_hash",
    "reason",
    "diff",
    "escalated",
    "remind_at",
    "next_due_at",
    "preview",
    "preview_digest",
)
"""What deciding, expiring, escalating or reminding may change of an approval (an edit
changes the preview with the arguments)."""


def changes(approval: Approval) -> dict[str, Any]:
    """The columns a decision writes: what was asked, and who consumed it, stay as stored."""
    row = row_of(approval)
    return {name: row[name] for name in CHANGING}


def row_of(approval: Approval) -> dict[str, Any]:
    """Every column of ``approval``'s row."""
    return {
        "id": approval.id,
        "run_id": approval.run_id,
        "position": approval.position,
        "kind": approval.kind.value,
        "tool": approval.tool,
        "args": approval.args,
        "args_hash": approval.args_hash,
        "fingerprint": approval.fingerprint,
        "policy": approval.policy.to_json(),
        "requester": approval.requester.to_json(),
        "requested_at": approval.requested_at,
        "deadline": approval.deadline,
        "reason_asked": approval.reason_asked,
        "status": approval.status.value,
        "votes": list(approval.approvals),
        "decided_by": None if approval.decided_by is None else approval.decided_by.to_json(),
        "decided_at": approval.decided_at,
        "decided_args": approval.decided_args,
        "decided_args_hash": approval.decided_args_hash,
        "reason": approval.reason,
        "diff": approval.diff,
        "escalated": approval.escalated,
        "remind_at": approval.remind_at,
        "next_due_at": approval.next_due_at,
        "consumed_by": approval.consumed_by,
        "preview": approval.preview,
        "preview_digest": approval.preview_digest,
        "version": approval.version,
    }


def approval_of(row: Row[Any]) -> Approval:
    """The approval a row holds."""
    return Approval(
        id=row.id,
        run_id=row.run_id,
        position=row.position,
        kind=ApprovalKind(row.kind),
        tool=row.tool,
        args=row.args,
        args_hash=row.args_hash,
        fingerprint=row.fingerprint,
        policy=PolicySnapshot.from_json(row.policy),
        requester=Actor.from_json(row.requester),
        requested_at=row.requested_at,
        deadline=row.deadline,
        reason_asked=row.reason_asked,
        status=ApprovalStatus(row.status),
        approvals=tuple(row.votes),
        decided_by=None if row.decided_by is None else Actor.from_json(row.decided_by),
        decided_at=row.decided_at,
        decided_args=row.decided_args,
        decided_args_hash=row.decided_args_hash,
        reason=row.reason,
        diff=row.diff,
        escalated=row.escalated,
        remind_at=row.remind_at,
        consumed_by=row.consumed_by,
        preview=row.preview,
        preview_digest=row.preview_digest,
        version=row.version,
    )
