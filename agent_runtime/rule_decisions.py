"""Turning the rules' verdict (or a grant) on a new approval into a ruling the store applies
atomically."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from agent_runtime.approvals import Actor, Approval, ApprovalStatus, Decision
from agent_runtime.audit import AuditDraft
from agent_runtime.grants import GRANT_ACTOR_PREFIX, Grant
from agent_runtime.notices import Notice
from agent_runtime.records import Event
from agent_runtime.rules import (
    RULE_ACTOR_PREFIX,
    Rule,
    RuleAction,
    Verdict,
    limit_window,
    rule_approvals,
)
from agent_runtime.store import Ruling

POLICY_ACTOR_PREFIX = "policy:"
"""The user id prefix of decisions the approval policy itself made (``agent_runtime.quorum``)."""
AUTOMATIC_ACTOR_PREFIXES = (RULE_ACTOR_PREFIX, GRANT_ACTOR_PREFIX, POLICY_ACTOR_PREFIX)
"""Decisions recorded under these user ids were made by no person: a rule, a grant, the
policy."""

Drafter = Callable[[Approval, str, Actor | None, dict[str, Any] | None], AuditDraft]
"""Makes an audit entry: approval, action, actor, detail."""


def rule_actor(rule: Rule) -> Actor:
    """Return the actor a rule's decisions are recorded as: ``rule:<id>``."""
    return Actor(user_id=rule.actor_id, name=rule.actor_id)


def rule_detail(rule: Rule) -> dict[str, Any]:
    """Return what the audit log records of a rule: its id and version hash."""
    return {"rule": rule.id, "rule_version": rule.version, "rule_action": rule.action.value}


def ruling(
    approval: Approval,
    verdict: Verdict,
    now: datetime,
    draft: Drafter,
    changed: Callable[[Approval, str], Sequence[Notice]],
    wake: Callable[[Approval], Event],
) -> Ruling:
    """Return what ``verdict`` makes of the new ``approval``: shadow entries always, and the
    deciding rule's approval or rejection (an approval only within the rule's limits)."""
    shadows = shadow_drafts(approval, verdict, draft)
    rule = verdict.rule
    if rule is None or rule.action == RuleAction.REQUIRE:
        return Ruling(since=limit_window(now), shadows=shadows)
    decided = _decided(approval, rule, now)
    decision = Decision.APPROVE if rule.action == RuleAction.AUTO_APPROVE else Decision.REJECT
    detail = {
        "decision": decision.value,
        "status": decided.status.value,
        "args": decided.decided_args,
        "args_hash": decided.decided_args_hash,
        "reason": decided.reason,
        **rule_detail(rule),
    }
    limited = draft(
        approval,
        "rule.limited",
        rule_actor(rule),
        {**rule_detail(rule), "limits": rule.limits.to_json()},
    )

    def allowed(used: Sequence[Approval]) -> bool:
        return decision == Decision.REJECT or rule.limits.allow(
            rule_approvals(used, rule), approval.run_id, approval.args, now
        )

    return Ruling(
        since=limit_window(now),
        shadows=shadows,
        decided=decided,
        decision=draft(approval, decision.value, rule_actor(rule), detail),
        notices=[*changed(decided, "requested"), *changed(decided, decision.value)],
        wake=wake(decided),
        limited=limited,
        allowed=allowed,
    )


def grant_actor(grant: Grant) -> Actor:
    """Return the actor a grant's decisions are recorded as: ``grant:<id>``."""
    return Actor(user_id=grant.actor_id, name=grant.actor_id)


def grant_detail(grant: Grant) -> dict[str, Any]:
    """Return what the audit log records of a grant deciding: its id, version and grantor."""
    return {
        "grant": grant.id,
        "grant_version": grant.version,
        "granted_by": grant.granted_by.to_json(),
        "scope": grant.scope.value,
    }


def grant_ruling(
    approval: Approval,
    grant: Grant,
    shadows: Sequence[AuditDraft],
    now: datetime,
    draft: Drafter,
    changed: Callable[[Approval, str], Sequence[Notice]],
    wake: Callable[[Approval], Event],
) -> Ruling:
    """Return the approval of ``approval`` by ``grant``, applied only if the grant, as stored
    when the approval is, still covers it (not revoked, not expired)."""
    decided = _approved(approval, grant_actor(grant), now, None)
    detail = {
        "decision": Decision.APPROVE.value,
        "status": decided.status.value,
        "args": decided.decided_args,
        "args_hash": decided.decided_args_hash,
        **grant_detail(grant),
    }
    return Ruling(
        since=limit_window(now),
        shadows=shadows,
        decided=decided,
        decision=draft(approval, Decision.APPROVE.value, grant_actor(grant), detail),
        notices=[*changed(decided, "requested"), *changed(decided, Decision.APPROVE.value)],
        wake=wake(decided),
        limited=draft(approval, "grant.lapsed", grant_actor(grant), grant_detail(grant)),
        grant=grant.id,
        still_granted=lambda stored: stored is not None and stored.active(now),
    )


def shadow_drafts(approval: Approval, verdict: Verdict, draft: Drafter) -> list[AuditDraft]:
    """Return the audit entries of the shadow rules that match ``approval``."""
    return [
        draft(
            approval,
            "rule.shadow",
            rule_actor(rule),
            {**rule_detail(rule), "would": rule.action.value, "reason": rule.reason},
        )
        for rule in verdict.shadows
    ]


def _decided(approval: Approval, rule: Rule, now: datetime) -> Approval:
    actor = rule_actor(rule)
    if rule.action == RuleAction.DENY:
        return dataclasses.replace(
            approval,
            status=ApprovalStatus.REJECTED,
            decided_by=actor,
            decided_at=now,
            reason=rule.reason or f"denied by {rule.actor_id}",
            remind_at=None,
        )
    return _approved(approval, actor, now, rule.reason or None)


def _approved(approval: Approval, actor: Actor, now: datetime, reason: str | None) -> Approval:
    vote = {**actor.to_json(), "at": now.isoformat(), "args_hash": approval.args_hash}
    return dataclasses.replace(
        approval,
        status=ApprovalStatus.APPROVED,
        decided_by=actor,
        decided_at=now,
        approvals=(vote,),
        decided_args=approval.args,
        decided_args_hash=approval.args_hash,
        reason=reason,
        remind_at=None,
    )
