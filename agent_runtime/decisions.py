"""A decided approval as the waiting run receives it: one of four outcomes.

The run's journal keeps the decision as ``Approval.summary`` wrote it (a JSON object with
``status``); ``read_decision`` turns that object into the outcome it names, so callers
``match`` on a type instead of comparing status strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.approvals import Actor, ApprovalStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class Approved:
    """The call was approved: it may run once, with exactly ``args`` (hash ``args_hash``)."""

    approval_id: str
    args: dict[str, Any]
    args_hash: str
    by: Actor | None
    """Who gave the deciding approval (a rule's or grant's actor when one decided)."""
    at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected:
    """A person (or a rule) rejected the call, saying why."""

    approval_id: str
    reason: str | None
    by: Actor | None
    at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Expired:
    """Nobody decided before the deadline: rejected, fail-closed."""

    approval_id: str
    reason: str | None
    at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancelled:
    """The run was cancelled while the approval waited."""

    approval_id: str
    reason: str | None
    by: Actor | None
    at: datetime | None


Decided = Approved | Rejected | Expired | Cancelled
"""What became of an approval once it is no longer pending."""

Declined = Rejected | Expired | Cancelled
"""An outcome that does not let the call run."""


def read_decision(summary: Mapping[str, Any]) -> Decided:
    """Read a decision as ``Approval.summary`` wrote it; ``ValueError`` if it is undecided."""
    status = ApprovalStatus(summary["status"])
    approval_id = str(summary["approval_id"])
    by = None if summary.get("decided_by") is None else Actor.from_json(summary["decided_by"])
    at = (
        None if summary.get("decided_at") is None else datetime.fromisoformat(summary["decided_at"])
    )
    reason = summary.get("reason")
    match status:
        case ApprovalStatus.APPROVED:
            return Approved(
                approval_id=approval_id,
                args=summary["args"],
                args_hash=summary["args_hash"],
                by=by,
                at=at,
            )
        case ApprovalStatus.REJECTED:
            return Rejected(approval_id=approval_id, reason=reason, by=by, at=at)
        case ApprovalStatus.EXPIRED:
            return Expired(approval_id=approval_id, reason=reason, at=at)
        case ApprovalStatus.CANCELLED:
            return Cancelled(approval_id=approval_id, reason=reason, by=by, at=at)
    raise ValueError(f"approval {approval_id} is not decided ({status.value})")


def status_of(decision: Decided) -> ApprovalStatus:
    """Return the approval status ``decision`` stands for."""
    match decision:
        case Approved():
            return ApprovalStatus.APPROVED
        case Rejected():
            return ApprovalStatus.REJECTED
        case Expired():
            return ApprovalStatus.EXPIRED
        case Cancelled():
            return ApprovalStatus.CANCELLED
