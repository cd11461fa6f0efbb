"""Approvals as saved state: the record, and the rules that judge a decision on it."""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NewType

from agent_runtime.policy import PolicySnapshot
from agent_runtime.serialization import canonical_json

ApprovalId = NewType("ApprovalId", str)
"""An approval's opaque id: derived from its run and journal position, so it is stable."""


def approval_id(run_id: str, position: int) -> ApprovalId:
    """Return the stable id of the approval requested at ``position`` of run ``run_id``."""
    return ApprovalId(hashlib.sha256(f"{run_id}:{position}".encode()).hexdigest()[:24])


def args_hash(args: Any) -> str:
    """Return the SHA-256 of the canonical JSON of a tool call's arguments."""
    return hashlib.sha256(canonical_json(args, what="tool arguments").encode()).hexdigest()


class ApprovalStatus(enum.StrEnum):
    """Where an approval is in its life."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    """Closed unanswered because its run was cancelled."""
    SUPERSEDED = "superseded"
    """Approved, then closed unused: what the call would do changed before it ran (its
    preview), so the approval was asked again."""


class ApprovalKind(enum.StrEnum):
    """What is being asked."""

    TOOL_CALL = "tool_call"
    """May this tool run with these arguments?"""
    OUTCOME = "outcome"
    """Did this side effect, interrupted by a crash, happen? (approve = yes, it happened)"""
    BUDGET = "budget"
    """May this run, its budget used up, go on with the limits raised to ``raise_to``?"""


class Decision(enum.StrEnum):
    """What a person can decide."""

    APPROVE = "approve"
    REJECT = "reject"
    EDIT = "edit"


@dataclass(frozen=True, slots=True, kw_only=True)
class Actor:
    """A person, as Slack knows them."""

    user_id: str
    team_id: str = ""
    name: str = ""
    enterprise_id: str = ""
    """The Enterprise Grid organization the person belongs to ('' outside Grid)."""

    def to_json(self) -> dict[str, str]:
        """Return the JSON form."""
        found = {"user_id": self.user_id, "team_id": self.team_id, "name": self.name}
        return found | ({"enterprise_id": self.enterprise_id} if self.enterprise_id else {})

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Actor:
        """Read the JSON form."""
        return cls(
            user_id=data["user_id"],
            team_id=data.get("team_id", ""),
            name=data.get("name", ""),
            enterprise_id=data.get("enterprise_id", ""),
        )

    @property
    def workspace(self) -> str:
        """Where the person's user id means this person: their organization on Grid, else
        their workspace ('' when unknown, as for people acting from the command line)."""
        return self.enterprise_id or self.team_id

    def shares_workspace(self, other: Actor) -> bool:
        """Tell whether the two could be the same people's ids in one workspace: a user id
        of one workspace never stands for anyone in another."""
        return not (self.workspace and other.workspace) or self.workspace == other.workspace

    @property
    def label(self) -> str:
        """The name if known, else the user id."""
        return self.name or self.user_id


def names(entry: str, actor: Actor) -> bool:
    """Whether an approver list entry names ``actor``: a user id (of whichever workspace the
    run is in), or ``USER@WORKSPACE`` (that user of that workspace, or Grid organization, only).
    """
    user, scoped, workspace = entry.partition("@")
    if not scoped:
        return user == actor.user_id
    return user == actor.user_id and workspace in {actor.team_id, actor.enterprise_id} - {""}


def listed(entries: Iterable[str], actor: Actor) -> bool:
    """Whether any of the approver list ``entries`` names ``actor``."""
    return any(names(entry, actor) for entry in entries)


def local_people(entries: Iterable[str], where: Actor) -> tuple[str, ...]:
    """The user ids the approver list ``entries`` give in ``where``'s workspace (entries
    scoped to another workspace left out)."""
    found = []
    for entry in entries:
        user, scoped, workspace = entry.partition("@")
        if not scoped or not where.workspace or workspace in {where.team_id, where.enterprise_id}:
            found.append(user)
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """A request for sign-off and, once decided, who decided what, when, on which arguments."""

    id: ApprovalId
    run_id: str
    position: int
    kind: ApprovalKind
    tool: str
    args: dict[str, Any]
    args_hash: str
    fingerprint: str
    policy: PolicySnapshot
    requester: Actor
    requested_at: datetime
    deadline: datetime
    reason_asked: str = ""
    status: ApprovalStatus = ApprovalStatus.PENDING
    approvals: tuple[dict[str, Any], ...] = ()
    decided_by: Actor | None = None
    decided_at: datetime | None = None
    decided_args: dict[str, Any] | None = None
    decided_args_hash: str | None = None
    reason: str | None = None
    diff: list[dict[str, Any]] | None = None
    escalated: bool = False
    remind_at: datetime | None = None
    consumed_by: int | None = None
    """The journal position of the one tool execution this approval allowed."""
    preview: dict[str, Any] | None = None
    """What the call would do with ``proposed_args``, as shown to approvers (JSON of
    ``agent_runtime.previews.Shown``); None when the tool declared no preview."""
    preview_digest: str | None = None
    """The digest of ``preview`` (None if it failed or there is none): the call runs only if
    its preview, computed again just before, has this digest."""
    version: int = 0

    @property
    def proposed_args(self) -> dict[str, Any]:
        """The arguments an approval now counts for: the last edit's, else the asked ones."""
        return self.decided_args if self.decided_args is not None else self.args

    @property
    def proposed_hash(self) -> str:
        """The SHA-256 of ``proposed_args``: what a person must have seen to approve."""
        return self.decided_args_hash or self.args_hash

    @property
    def next_due_at(self) -> datetime | None:
        """When the sweep must next look at this approval (deadline or reminder); None once
        decided."""
        if self.status != ApprovalStatus.PENDING:
            return None
        if self.remind_at is not None and self.remind_at < self.deadline:
            return self.remind_at
        return self.deadline

    @property
    def eligible(self) -> tuple[str, ...]:
        """User ids allowed to decide now (the escalation list once escalated)."""
        return self.policy.escalate_to if self.escalated else self.policy.approvers

    def summary(self) -> dict[str, Any]:
        """Return the decision as the waiting run receives it."""
        return {
            "approval_id": self.id,
            "status": self.status.value,
            "decided_by": None if self.decided_by is None else self.decided_by.to_json(),
            "decided_at": None if self.decided_at is None else self.decided_at.isoformat(),
            "args": self.decided_args,
            "args_hash": self.decided_args_hash,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why a decision was not taken; ``audit`` names the attempt as the log records it."""

    message: str
    audit: str | None


def judge(
    approval: Approval,
    actor: Actor,
    decision: Decision,
    now: datetime,
    *,
    reason: str | None = None,
    edited_args: dict[str, Any] | None = None,
    seen_hash: str | None = None,
) -> Approval | Refusal:
    """Return the approval as ``decision`` leaves it, or why it cannot be taken.

    ``seen_hash`` is the hash of the arguments the person was shown (on a card, in a modal).
    An approval or an edit counts only for those arguments: if they changed since (another
    approver edited them), the decision is refused as stale. A rejection is never stale.
    """
    refusal = _refusal(approval, actor, now)
    if refusal is not None:
        return refusal
    if (
        decision != Decision.REJECT
        and seen_hash is not None
        and (seen_hash != approval.proposed_hash)
    ):
        return Refusal(message=STALE_CARD, audit="stale")
    if decision == Decision.REJECT:
        if not (reason or "").strip():
            return Refusal(message="a rejection needs a reason", audit=None)
        return _decided(approval, ApprovalStatus.REJECTED, actor, now, reason=reason)
    if decision == Decision.EDIT:
        if edited_args is None:
            return Refusal(message="an edit needs the edited arguments", audit=None)
        return _vote(approval, actor, now, edited_args, reason)
    return _vote(approval, actor, now, approval.proposed_args, reason)


STALE_CARD = (
    "the arguments changed since you were shown them; "
    "nothing was recorded: check the new arguments and decide again"
)


def _refusal(approval: Approval, actor: Actor, now: datetime) -> Refusal | None:
    if not listed(approval.eligible, actor) or not actor.shares_workspace(approval.requester):
        # an outsider learns nothing about the approval's state
        return Refusal(message=NOT_ALLOWED, audit="unauthorized")
    if approval.status != ApprovalStatus.PENDING:
        return Refusal(message=_already(approval), audit="late")
    if now >= approval.deadline:
        return Refusal(message=f"this approval expired at {_hhmm(approval.deadline)}", audit="late")
    if actor.user_id == approval.requester.user_id and not approval.policy.allow_requester:
        return Refusal(
            message="you asked for this action, so someone else must decide", audit="unauthorized"
        )
    if any(v["user_id"] == actor.user_id for v in approval.approvals):
        return Refusal(
            message="you have already approved; waiting for another approver", audit=None
        )
    return None


NOT_ALLOWED = "you are not allowed to decide this approval"


def _vote(
    approval: Approval, actor: Actor, now: datetime, args: dict[str, Any], reason: str | None
) -> Approval:
    digest = args_hash(args)
    # votes count for the arguments they were cast on: an edit starts the count again
    votes = approval.approvals if digest == approval.decided_args_hash else ()
    votes = (*votes, {**actor.to_json(), "at": now.isoformat(), "args_hash": digest})
    diff = arguments_diff(approval.args, args)
    changed = replace(
        approval, approvals=votes, decided_args=args, decided_args_hash=digest, diff=diff or None
    )
    if len(votes) < approval.policy.required:
        return changed
    return _decided(changed, ApprovalStatus.APPROVED, actor, now, reason=reason)


def _decided(
    approval: Approval,
    status: ApprovalStatus,
    actor: Actor | None,
    now: datetime,
    *,
    reason: str | None,
) -> Approval:
    return replace(
        approval, status=status, decided_by=actor, decided_at=now, reason=reason, remind_at=None
    )


def expire(approval: Approval, now: datetime) -> Approval:
    """Return the approval rejected by its deadline (fail-closed)."""
    return _decided(
        approval, ApprovalStatus.EXPIRED, None, now, reason="no decision before the deadline"
    )


def arguments_diff(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the top-level changes from ``before`` to ``after``."""
    changes = []
    for key in sorted(set(before) | set(after)):
        if before.get(key, _MISSING) != after.get(key, _MISSING):
            changes.append({"field": key, "from": before.get(key), "to": after.get(key)})
    return changes


def _already(approval: Approval) -> str:
    if approval.status == ApprovalStatus.EXPIRED or approval.decided_by is None:
        return f"this approval already {approval.status.value}"
    at = _hhmm(approval.decided_at) if approval.decided_at else "?"
    return f"already {approval.status.value} by {approval.decided_by.label} at {at}"


def _hhmm(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


_MISSING = object()
