"""Grants: a person's approval of similar calls given ahead of time, from an approval's card.

"Approve and allow similar for this run" approves the call and grants, for the rest of the
run, calls of the same tool whose arguments satisfy a predicate (by default: every number
at most the approved one). Approvers with the right may grant for 24 hours, for every run.
A grant counts only where its grantor's own approval would have counted alone: the grantor
may decide the new approval, one approval is enough, and the grantor did not ask for it.
Later calls it covers are decided as ``grant:<id>``; a revoked or expired grant covers none.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from agent_runtime.approvals import Actor, Approval, ApprovalKind, listed
from agent_runtime.notices import Notice
from agent_runtime.rules import AllOf, Condition, Op, Predicate, RuleContext, parse_predicate
from agent_runtime.serialization import canonical_json

GRANT_ACTOR_PREFIX = "grant:"
GRANT_LIFETIME = timedelta(hours=24)
"""How long any grant lasts at most (a run grant also ends with its run's approvals)."""


class GrantScope(enum.StrEnum):
    """Which later calls a grant may cover."""

    RUN = "run"
    """Calls of the same run."""
    DAY = "day"
    """Calls of any run, for 24 hours."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """Who allowed which calls, when, until when; and who revoked it, if anyone did."""

    id: str
    tool: str
    scope: GrantScope
    run_id: str
    """The run of the approval it was given from (the only run a run grant covers)."""
    source_approval: str
    when: Predicate
    granted_by: Actor
    granted_at: datetime
    expires_at: datetime
    revoked_by: Actor | None = None
    revoked_at: datetime | None = None

    @property
    def actor_id(self) -> str:
        """The user id its decisions are recorded under: ``grant:<id>``."""
        return GRANT_ACTOR_PREFIX + self.id

    @property
    def version(self) -> str:
        """The SHA-256 of what the grant allows: its terms, as the audit log records them."""
        return hashlib.sha256(canonical_json(self.terms()).encode()).hexdigest()

    def active(self, now: datetime) -> bool:
        """Tell whether the grant still covers calls at ``now``."""
        return self.revoked_at is None and now < self.expires_at

    def covers(self, approval: Approval, context: RuleContext, now: datetime) -> bool:
        """Tell whether the grant decides ``approval`` (asked at ``now``)."""
        return (
            self.active(now)
            and approval.kind == ApprovalKind.TOOL_CALL
            and approval.tool == self.tool
            and (self.scope == GrantScope.DAY or approval.run_id == self.run_id)
            and grantor_may_decide(self.granted_by, approval)
            and self.when.holds(approval.tool, approval.args, context)
        )

    def terms(self) -> dict[str, Any]:
        """Return what the grant allows, who gave it and until when (its canonical form)."""
        return {
            "id": self.id,
            "tool": self.tool,
            "scope": self.scope.value,
            "run_id": self.run_id,
            "source_approval": self.source_approval,
            "when": self.when.to_json(),
            "granted_by": self.granted_by.to_json(),
            "granted_at": self.granted_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
        }

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form: the terms, and the revocation if any."""
        return self.terms() | {
            "revoked_by": None if self.revoked_by is None else self.revoked_by.to_json(),
            "revoked_at": None if self.revoked_at is None else self.revoked_at.isoformat(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Grant:
        """Read the JSON form."""
        revoked_by, revoked_at = data.get("revoked_by"), data.get("revoked_at")
        return cls(
            id=data["id"],
            tool=data["tool"],
            scope=GrantScope(data["scope"]),
            run_id=data["run_id"],
            source_approval=data["source_approval"],
            when=parse_predicate(data["when"]),
            granted_by=Actor.from_json(data["granted_by"]),
            granted_at=datetime.fromisoformat(data["granted_at"]),
            expires_at=datetime.fromisoformat(data["expires_at"]),
            revoked_by=None if revoked_by is None else Actor.from_json(revoked_by),
            revoked_at=None if revoked_at is None else datetime.fromisoformat(revoked_at),
        )


class GrantNotifier(Protocol):
    """Decides which notices a grant's creation or revocation causes (pure)."""

    def grant_changed(self, grant: Grant, action: str) -> Sequence[Notice]:
        """Notices for a grant ``created`` or ``revoked``."""
        ...


class NoGrantNotices:
    """Tells nobody of grants (the default)."""

    def grant_changed(self, grant: Grant, action: str) -> Sequence[Notice]:
        """No notices."""
        return ()


def grant_id(approval_id: str, scope: GrantScope) -> str:
    """Return the stable id of the grant of ``scope`` given from an approval (a retried click
    makes the same grant)."""
    return hashlib.sha256(f"grant:{approval_id}:{scope.value}".encode()).hexdigest()[:16]


def grantor_may_decide(grantor: Actor, approval: Approval) -> bool:
    """Tell whether ``grantor``'s approval alone would decide ``approval``: they may decide it
    (listed, and of the workspace the run is from), one approval is enough, and they did not
    ask for it (unless the policy allows the requester)."""
    policy = approval.policy
    return (
        listed(approval.eligible, grantor)
        and grantor.shares_workspace(approval.requester)
        and policy.required == 1
        and (grantor.user_id != approval.requester.user_id or policy.allow_requester)
    )


def similar(args: Mapping[str, Any]) -> Predicate:
    """The default predicate of "similar" calls: each number at most the approved one, each
    true/false the same; other arguments are free."""
    parts: list[Predicate] = []
    for name, value in sorted(args.items()):
        if isinstance(value, bool):
            parts.append(Condition(f"args.{name}", Op.EQ, value))
        elif isinstance(value, int | float):
            parts.append(Condition(f"args.{name}", Op.LE, value))
    return AllOf(tuple(parts))


def describe(predicate: Predicate) -> str:
    """The predicate in words, for people: ``args.amount_cents <= 5000 and …``."""
    if isinstance(predicate, Condition):
        return f"{predicate.field} {predicate.op.value} {canonical_json(predicate.value)}"
    if not predicate.parts:
        return "any arguments" if isinstance(predicate, AllOf) else "no arguments"
    joiner = " and " if isinstance(predicate, AllOf) else " or "
    return joiner.join(
        describe(part) if isinstance(part, Condition) else f"({describe(part)})"
        for part in predicate.parts
    )
