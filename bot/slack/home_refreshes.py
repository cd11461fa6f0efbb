"""Whose Home tab a change re-publishes: the people an approval waits or waited on, its
requester, a grant's grantor, and the requester of a run that began or ended.

Each is a ``HOME_REFRESH`` notice queued with the change; the store keeps it only for people
who have opened their tab, one waiting per person (``store.home_tabs``), and the dispatcher
builds the tab when it sends it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_runtime import Actor, AgentInput, Approval, Run
from agent_runtime.approvals import local_people
from agent_runtime.grants import Grant
from agent_runtime.notices import Notice
from store import HOME_REFRESH

UNCHANGED = frozenset({"reminded"})
"""Approval changes that leave every Home tab as it was."""


def approval_refreshes(
    approval: Approval, action: str, where: dict[str, Any], *, automatic: bool
) -> list[Notice]:
    """The refreshes an approval's change causes: its requester's, and (unless a rule or a
    grant decided it as it was asked) everyone who may decide it or might have."""
    if action in UNCHANGED:
        return []
    people = [approval.requester.user_id]
    if not automatic:
        listed = (*approval.policy.approvers, *approval.policy.escalate_to)
        people += local_people(listed, approval.requester)
    return refreshes(people, where)


def grant_refreshes(grant: Grant, where: dict[str, Any]) -> list[Notice]:
    """The refresh a grant made or revoked causes: its grantor's."""
    return refreshes([grant.granted_by.user_id], where)


def run_refreshes(run: Run, where: dict[str, Any]) -> list[Notice]:
    """The refresh a run beginning or ending causes: its requester's (their recent runs)."""
    data = AgentInput.of(run.input)
    return [] if data is None else refreshes([data.requester.user_id], where)


def refreshes(users: Iterable[str], where: dict[str, Any]) -> list[Notice]:
    """A refresh of each of ``users``' tabs in the workspace of a run's Slack context."""
    team, enterprise = str(where.get("team") or ""), str(where.get("enterprise") or "")
    return [
        Notice(
            key=f"home:refresh:{enterprise or team}:{user}",
            run_id=None,
            kind=HOME_REFRESH,
            data={"user": Actor(user_id=user, team_id=team, enterprise_id=enterprise).to_json()},
            team_id=team,
            enterprise_id=enterprise,
        )
        for user in dict.fromkeys(users)
        if user
    ]
