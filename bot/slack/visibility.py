"""Who may see an approval or a run from Slack: its workspace, its requester, its deciders."""

from __future__ import annotations

from dataclasses import dataclass

from agent_runtime import Actor, AgentInput, Agents, Approval, Run, RunId, RunNotFound, Runtime
from agent_runtime.approvals import listed
from agent_runtime.budget_control import NotAllowed
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


@dataclass(frozen=True, slots=True)
class RunAccess:
    """Who may see a run from Slack, and who may cancel or fork it."""

    runtime: Runtime
    agents: Agents

    def check_visible(self, run_id: RunId, actor: Actor, channel: str) -> None:
        """A run is shown in the channel it was started from, and anywhere to the person who
        started it and its approvers; to anyone else it does not exist."""
        run = self.runtime.get(run_id)
        started_here = (slack_context(run) or {}).get("channel") == channel
        if not same_workspace(run, actor) or (
            not started_here and not self.may_control(run, actor)
        ):
            raise RunNotFound(run_id)

    def may_control(self, run: Run, actor: Actor) -> bool:
        """Whether ``actor`` started the run or may raise its budget (its approvers)."""
        data = AgentInput.of(run.input)
        agent = self.agents.for_workflow(run.workflow)
        return (data is not None and data.requester.user_id == actor.user_id) or (
            agent is not None and agent.may_raise_budget(actor)
        )

    def check_control(self, run: Run, actor: Actor, verb: str) -> None:
        """Only the person who started a run, or its approvers, may cancel or fork it."""
        if not self.may_control(run, actor):
            raise NotAllowed(f"only the person who started a run or its approvers may {verb} it")
