"""Approve-and-grant and revoke, from any process: grants are approvals given ahead of time."""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from agent_runtime.approval_service import Approvals, DecisionResult
from agent_runtime.approvals import Actor, Approval, ApprovalKind, ApprovalStatus, Decision
from agent_runtime.audit import AuditDraft
from agent_runtime.clock import Clock
from agent_runtime.exceptions import GrantRefused
from agent_runtime.grants import (
    GRANT_LIFETIME,
    Grant,
    GrantNotifier,
    GrantScope,
    NoGrantNotices,
    grant_id,
    similar,
)
from agent_runtime.rules import Predicate
from agent_runtime.store import Granting

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class GrantResult:
    """The approval's decision and, if it was an approval by the grantor, the grant."""

    decision: DecisionResult
    grant: Grant | None


class Grants:
    """Make and revoke grants. ``day_granters`` may grant for 24 hours across runs."""

    def __init__(
        self,
        approvals: Approvals,
        clock: Clock,
        *,
        day_granters: Collection[str] = (),
        notifier: GrantNotifier | None = None,
    ) -> None:
        self.approvals = approvals
        self._clock = clock
        self.day_granters = frozenset(day_granters)
        self._notifier: GrantNotifier = notifier or NoGrantNotices()

    def may_grant(self, approval: Approval, actor: Actor, scope: GrantScope) -> str | None:
        """Tell why ``actor`` may not grant ``scope`` from ``approval`` (None if they may)."""
        if approval.kind != ApprovalKind.TOOL_CALL:
            return "only a tool call's approval can allow similar calls"
        if approval.policy.required != 1:
            return "this tool needs more than one approver, so no one person can allow it ahead"
        if scope == GrantScope.DAY and actor.user_id not in self.day_granters:
            return "you may not allow calls for 24 hours; you can allow them for this run"
        return None

    def offer(
        self, approval: Approval, actor: Actor, scope: GrantScope, when: Predicate | None = None
    ) -> Grant:
        """Return the grant ``actor`` would make from ``approval`` now (not stored)."""
        return self._grant(approval, actor, scope, when, self._clock.now())

    def approve_and_grant(
        self,
        approval_id: str,
        actor: Actor,
        scope: GrantScope,
        *,
        seen_hash: str,
        when: Predicate | None = None,
    ) -> GrantResult:
        """Approve the call ``actor`` saw and, in the same transaction, store the grant.

        A refused approval makes no grant; a retried click on an approval the same person
        already approved makes the grant (the same one: its id comes from the approval)."""
        approval = self.approvals.get(approval_id)
        refusal = self.may_grant(approval, actor, scope)
        if refusal is not None:
            raise GrantRefused(refusal)

        def granting(approved: Approval) -> Granting:
            made = self._grant(approved, actor, scope, when, approved.decided_at)
            return made, self._created(made), self._notifier.grant_changed(made, "created")

        result = self.approvals.decide(
            approval_id, actor, Decision.APPROVE, seen_hash=seen_hash, grant=granting
        )
        decided = result.approval
        if decided.status != ApprovalStatus.APPROVED or (
            decided.decided_by is None or decided.decided_by.user_id != actor.user_id
        ):
            return GrantResult(decision=result, grant=None)
        if not result.accepted:  # a retried click: the approval is this person's already
            self.approvals.store.create_grant(*granting(decided))
        stored = self.approvals.store.get_grant(grant_id(approval_id, scope))
        logger.info("grant made", extra={"action": "grant", "run_id": stored.run_id})
        return GrantResult(decision=result, grant=stored)

    def revoke(self, grant_id: str, actor: Actor, *, operator: bool = False) -> Grant:
        """Revoke a grant at once, everywhere: its grantor, the approvers of the call it came
        from, those who may grant for a day, or (``operator``) the operator may."""
        grant = self.approvals.store.get_grant(grant_id)
        if not operator and not self._may_revoke(grant, actor):
            raise GrantRefused("you may not revoke this grant")
        if grant.revoked_at is not None:
            return grant
        now = self._clock.now()
        revoked = replace(grant, revoked_by=actor, revoked_at=now)
        audit = self._draft(
            revoked, "grant.revoked", actor, {"grant": grant.id, "grant_version": grant.version}
        )
        stored = self.approvals.store.revoke_grant(
            revoked, audit, self._notifier.grant_changed(revoked, "revoked")
        )
        logger.info("grant revoked", extra={"action": "grant_revoke", "run_id": grant.run_id})
        return stored or self.approvals.store.get_grant(grant_id)

    def list(self, *, active: bool = False, limit: int = 100) -> list[Grant]:
        """Return grants, newest first (only those still in force with ``active``)."""
        at = self._clock.now() if active else None
        return self.approvals.store.list_grants(active_at=at, limit=limit)

    def _may_revoke(self, grant: Grant, actor: Actor) -> bool:
        if actor.user_id == grant.granted_by.user_id or actor.user_id in self.day_granters:
            return True
        source = self.approvals.get(grant.source_approval)
        return actor.user_id in source.policy.approvers

    def _grant(
        self,
        approval: Approval,
        actor: Actor,
        scope: GrantScope,
        when: Predicate | None,
        at: datetime | None,
    ) -> Grant:
        now = at or self._clock.now()
        return Grant(
            id=grant_id(approval.id, scope),
            tool=approval.tool,
            scope=scope,
            run_id=approval.run_id,
            source_approval=approval.id,
            when=similar(approval.proposed_args) if when is None else when,
            granted_by=actor,
            granted_at=now,
            expires_at=now + GRANT_LIFETIME,
        )

    def _created(self, grant: Grant) -> AuditDraft:
        detail = {**grant.terms(), "version": grant.version}
        return self._draft(grant, "grant.created", grant.granted_by, detail)

    def _draft(self, grant: Grant, action: str, actor: Actor, detail: dict[str, Any]) -> AuditDraft:
        at: datetime = grant.revoked_at or grant.granted_at
        return AuditDraft(
            at=at,
            approval_id=grant.source_approval,
            run_id=grant.run_id,
            action=action,
            actor=actor.to_json(),
            detail=detail,
        )
