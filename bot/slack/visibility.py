"""Who may see an approval or a run from Slack: its workspace, its requester, its deciders."""

from __future__ import annotations

from agent_runtime import Actor, Approval, Run
from agent_runtime.approvals import listed
from bot.slack.notifier import slack_context


def own_decision(approval: Approval, actor: Actor) -> bool:
    """Tell whether ``actor``'s own decision closed the approval (a retried click's case)."""
    decider = approval.decided_by
    return (
        decider is not None and decider.user_id == actor.user_id and decider.shares_workspace(actor)
    )


def same_workspace(run: Run, actor: Actor) -> bool:
    """Whether the run was started in the actor's workspace (or not from Slack at all)."""
    where = slack_context(run) or {}
    started_in = Actor(
        user_id="",
        team_id=str(where.get("team") or ""),
        enterprise_id=str(where.get("enterprise") or ""),
    )
    return actor.shares_workspace(started_in)


def may_see(approval: Approval, actor: Actor) -> bool:
    """Whether ``actor`` may see the approval anywhere (of its workspace): its requester and
    everyone who may decide it."""
    policy = approval.policy
    deciders = (*policy.approvers, *policy.escalate_to)
    return actor.shares_workspace(approval.requester) and (
        actor.user_id == approval.requester.user_id or listed(deciders, actor)
    )
