"""Approval policies: who may sign off a tool call, how many, and by when."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any


class OnExpiry(enum.StrEnum):
    """What happens when an approval's deadline passes undecided."""

    REJECT = "reject"
    ESCALATE = "escalate"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPolicy:
    """Who may approve a tool call (user ids and/or named groups), how many, and by when.

    ``required`` distinct approvers must approve; any one rejection rejects. The person who
    started the run may approve only when ``allow_requester`` is set. When ``deadline``
    passes, the approval is rejected (fail-closed) or, with ``OnExpiry.ESCALATE``, handed
    to ``escalate_to`` for one more ``deadline``.
    """

    approvers: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    required: int = 1
    allow_requester: bool = False
    deadline: timedelta = timedelta(hours=24)
    on_expiry: OnExpiry = OnExpiry.REJECT
    escalate_to: tuple[str, ...] = ()
    remind_every: timedelta | None = None

    def __post_init__(self) -> None:
        if self.required < 1:
            raise ValueError("an approval policy needs at least one approver (required >= 1)")
        if not self.approvers and not self.groups:
            raise ValueError("an approval policy must name approvers or groups")
        if self.deadline <= timedelta(0):
            raise ValueError("the approval deadline must be positive")
        if self.on_expiry == OnExpiry.ESCALATE and not self.escalate_to:
            raise ValueError("escalation needs escalate_to approvers")

    def snapshot(self, groups: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
        """Return the policy as stored with an approval, with group members resolved now."""
        members = set(self.approvers)
        for group in self.groups:
            members.update(groups.get(group, ()))
        return {
            "approvers": sorted(members),
            "groups": list(self.groups),
            "required": self.required,
            "allow_requester": self.allow_requester,
            "deadline_seconds": self.deadline.total_seconds(),
            "on_expiry": self.on_expiry.value,
            "escalate_to": list(self.escalate_to),
            "remind_every_seconds": None
            if self.remind_every is None
            else self.remind_every.total_seconds(),
        }
