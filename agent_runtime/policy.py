"""Approval policies: who may sign off a tool call, how many, and by when."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agent_runtime import definitions

DEFAULT_DEADLINE = timedelta(hours=24)
"""How long an approval waits for a decision when its policy does not say."""


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
    deadline: timedelta = DEFAULT_DEADLINE
    on_expiry: OnExpiry = OnExpiry.REJECT
    escalate_to: tuple[str, ...] = ()
    remind_every: timedelta | None = None

    def __post_init__(self) -> None:
        kept = {
            "approvers": definitions.names(self.approvers, "approvers"),
            "groups": definitions.names(self.groups, "groups"),
            "escalate_to": definitions.names(self.escalate_to, "escalate_to"),
            "on_expiry": OnExpiry(self.on_expiry),
            "required": definitions.count(self.required, "required", least=1),
        }
        for name, value in kept.items():
            object.__setattr__(self, name, value)
        definitions.flag(self.allow_requester, "allow_requester")
        definitions.duration(self.deadline, "the approval deadline")
        definitions.optional_duration(self.remind_every, "remind_every")
        if not self.approvers and not self.groups:
            raise ValueError("an approval policy must name approvers or groups")
        if self.on_expiry == OnExpiry.ESCALATE and not self.escalate_to:
            raise ValueError("escalation needs escalate_to approvers")

    def snapshot(self, groups: Mapping[str, tuple[str, ...]]) -> PolicySnapshot:
        """Return the policy as stored with an approval, with group members resolved now."""
        members = set(self.approvers)
        for group in self.groups:
            members.update(groups.get(group, ()))
        return PolicySnapshot(
            approvers=tuple(sorted(members)),
            groups=self.groups,
            required=self.required,
            allow_requester=self.allow_requester,
            deadline=self.deadline,
            on_expiry=self.on_expiry,
            escalate_to=self.escalate_to,
            remind_every=self.remind_every,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySnapshot:
    """The policy an approval is asked under, its groups' members resolved when it was asked.

    Its JSON form is stored with the approval, written in its audit entry and hashed into
    the tool's fingerprint, so ``to_json`` never changes for a given snapshot. ``from_json``
    reads every stored form: keys a row lacks take the defaults they always had.
    """

    approvers: tuple[str, ...] = ()
    """Who may decide: the named approvers and the members of the named groups."""
    groups: tuple[str, ...] = ()
    required: int = 1
    allow_requester: bool = False
    deadline: timedelta = DEFAULT_DEADLINE
    on_expiry: OnExpiry = OnExpiry.REJECT
    escalate_to: tuple[str, ...] = ()
    remind_every: timedelta | None = None

    @property
    def escalates(self) -> bool:
        """Tell whether an undecided approval goes to ``escalate_to`` at its deadline."""
        return self.on_expiry == OnExpiry.ESCALATE

    def to_json(self) -> dict[str, Any]:
        """Return the stored form."""
        return {
            "approvers": list(self.approvers),
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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PolicySnapshot:
        """Read a stored form (any version: missing keys take their defaults)."""
        remind = data.get("remind_every_seconds")
        deadline = data.get("deadline_seconds")
        return cls(
            approvers=tuple(data.get("approvers") or ()),
            groups=tuple(data.get("groups") or ()),
            required=int(data.get("required", 1)),
            allow_requester=bool(data.get("allow_requester")),
            deadline=DEFAULT_DEADLINE if deadline is None else timedelta(seconds=deadline),
            on_expiry=OnExpiry(data.get("on_expiry") or OnExpiry.REJECT),
            escalate_to=tuple(data.get("escalate_to") or ()),
            remind_every=None if remind is None else timedelta(seconds=remind),
        )
