"""Turning the rules' verdict on a new approval into a ruling the store applies atomically."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from agent_runtime.approvals import Actor, Approval, ApprovalStatus, Decision
from agent_runtime.audit import AuditDraft
from agent_runtime.notices import Notice
from agent_runtime.records import Event
from agent_runtime.rules import Rule, RuleAction, Verdict, limit_window, rule_approvals
from agent_runtime.store import Ruling

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
    shadows = [
        draft(
            approval,
            "rule.shadow",
            rule_actor(rule),
            {**rule_detail(rule), "would": rule.action.value, "reason": rule.reason},
        )
        for rule in verdict.shadows
    ]
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
    vote = {**actor.to_json(), "at": now.isoformat(), "args_hash": approval.args_hash}
    return dataclasses.replace(
        approval,
        status=ApprovalStatus.APPROVED,
        decided_by=actor,
        decided_at=now,
        approvals=(vote,),
        decided_args=approval.args,
        decided_args_hash=approval.args_hash,
        reason=rule.reason or None,
        remind_at=None,
    )
