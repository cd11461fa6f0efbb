"""A quorum counts only the approvers who may decide in the run's workspace.

An approver list shared by several workspaces may name people of one workspace only
(``U0123@T0AAA``). Where fewer of its people may decide than the policy requires, the
approval could never be given: it is rejected as it is asked (fail closed), with a note
saying why, so that the run learns it at once rather than at the deadline. (An escalation
list counts too: once the deadline passes, its people decide.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime

from agent_runtime.approvals import Actor, Approval, ApprovalStatus, Decision, local_people
from agent_runtime.notices import Notice
from agent_runtime.policy import PolicySnapshot
from agent_runtime.records import Event
from agent_runtime.rule_decisions import POLICY_ACTOR_PREFIX, Drafter
from agent_runtime.store import Ruling

QUORUM_ACTOR = Actor(user_id=f"{POLICY_ACTOR_PREFIX}quorum", name="the approval policy")
"""Who the audit log and the cards name as rejecting an approval no quorum could give."""


def quorum_shortfall(policy: PolicySnapshot, requester: Actor) -> str | None:
    """Why the policy's quorum can never be met in ``requester``'s workspace (None if it can)."""
    required = policy.required
    people = len(local_people(policy.approvers, requester))
    if policy.escalates:  # the escalation list decides after the deadline
        people = max(people, len(local_people(policy.escalate_to, requester)))
    if required <= people:
        return None
    where = requester.workspace or "this workspace"
    return (
        f"the policy needs {required} approvals but only {people} of its approvers "
        f"may decide in {where}: refused without asking"
    )


def quorum_refusal(
    approval: Approval,
    note: str,
    now: datetime,
    draft: Drafter,
    changed: Callable[[Approval, str], Sequence[Notice]],
    wake: Callable[[Approval], Event],
) -> Ruling:
    """The ruling that stores ``approval`` already rejected, ``note`` as its reason."""
    rejected = dataclasses.replace(
        approval,
        status=ApprovalStatus.REJECTED,
        decided_by=QUORUM_ACTOR,
        decided_at=now,
        reason=note,
        remind_at=None,
    )
    detail = {"decision": Decision.REJECT.value, "status": rejected.status.value, "reason": note}
    return Ruling(
        since=now,
        decided=rejected,
        decision=draft(approval, Decision.REJECT.value, QUORUM_ACTOR, detail),
        notices=[*changed(rejected, "requested"), *changed(rejected, Decision.REJECT.value)],
        wake=wake(rejected),
    )


__all__ = ["QUORUM_ACTOR", "quorum_refusal", "quorum_shortfall"]
