"""Replaying approval rules over recorded approvals: what they would have decided, and where
they would have overruled a person."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_runtime.approvals import Actor, Approval, ApprovalKind, ApprovalStatus
from agent_runtime.rules import (
    RULE_ACTOR_PREFIX,
    Rule,
    RuleAction,
    RuleContext,
    RuleMode,
    Rules,
    rule_approvals,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Overruled:
    """A recorded approval a rule would have decided the other way from the person."""

    approval_id: str
    tool: str
    args: dict[str, Any]
    rule: str
    decided_by: str
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return dataclasses.asdict(self)


@dataclass(slots=True)
class ReplayReport:
    """Counts over the replayed approvals, and the decisions a rule would have overturned."""

    approvals: int = 0
    auto_approved: int = 0
    auto_denied: int = 0
    left_to_people: int = 0
    approved_but_rejected: list[Overruled] = field(default_factory=list)
    """Would have been approved by a rule, but a person rejected them: the number to watch."""
    denied_but_approved: list[Overruled] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Return the stable JSON form."""
        return {
            "approvals": self.approvals,
            "auto_approved": self.auto_approved,
            "auto_denied": self.auto_denied,
            "left_to_people": self.left_to_people,
            "approved_but_rejected": [o.to_json() for o in self.approved_but_rejected],
            "denied_but_approved": [o.to_json() for o in self.denied_but_approved],
        }


def replay(
    rules: Rules, history: Iterable[Approval], context: Callable[[Approval], RuleContext]
) -> ReplayReport:
    """Replay ``rules`` (shadow rules as if enforced) over ``history``, oldest first.

    Limits count the approvals the rules would have given earlier in the replay, so a
    rule's per-run, per-hour and daily limits hold as they would have. Only tool-call
    approvals are replayed: questions about a crashed call's outcome are never ruled on.
    """
    enforced = Rules(tuple(dataclasses.replace(r, mode=RuleMode.ENFORCE) for r in rules.rules))
    report = ReplayReport()
    given: list[Approval] = []
    for approval in sorted(history, key=lambda a: (a.requested_at, a.position, a.id)):
        if approval.kind != ApprovalKind.TOOL_CALL:
            continue
        report.approvals += 1
        rule = enforced.verdict(approval.tool, approval.args, context(approval)).rule
        action = _action(rule, approval, given)
        if rule is None or action == RuleAction.REQUIRE:
            report.left_to_people += 1
        elif action == RuleAction.AUTO_APPROVE:
            report.auto_approved += 1
            given.append(_approved_by(rule, approval))
            if _by_person(approval, ApprovalStatus.REJECTED):
                report.approved_but_rejected.append(_overruled(approval, rule))
        else:
            report.auto_denied += 1
            if _by_person(approval, ApprovalStatus.APPROVED):
                report.denied_but_approved.append(_overruled(approval, rule))
    return report


def _action(rule: Rule | None, approval: Approval, given: list[Approval]) -> RuleAction:
    if rule is None:
        return RuleAction.REQUIRE
    if rule.action != RuleAction.AUTO_APPROVE:
        return rule.action
    within = rule.limits.allow(
        rule_approvals(given, rule), approval.run_id, approval.args, approval.requested_at
    )
    return RuleAction.AUTO_APPROVE if within else RuleAction.REQUIRE


def _approved_by(rule: Rule, approval: Approval) -> Approval:
    actor = Actor(user_id=rule.actor_id, name=rule.actor_id)
    return dataclasses.replace(
        approval,
        status=ApprovalStatus.APPROVED,
        decided_by=actor,
        decided_at=approval.requested_at,
        decided_args=approval.args,
        decided_args_hash=approval.args_hash,
    )


def _by_person(approval: Approval, status: ApprovalStatus) -> bool:
    by = approval.decided_by
    return (
        approval.status == status
        and by is not None
        and not by.user_id.startswith(RULE_ACTOR_PREFIX)
    )


def _overruled(approval: Approval, rule: Rule) -> Overruled:
    assert approval.decided_by is not None
    return Overruled(
        approval_id=approval.id,
        tool=approval.tool,
        args=approval.args,
        rule=rule.id,
        decided_by=approval.decided_by.label,
        reason=approval.reason,
    )
