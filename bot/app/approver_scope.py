"""Whom an approver list names when Signoff serves many Slack workspaces.

A Slack user id names a person only within its workspace. An approval asked from inside a
workspace (a run started there) scopes its plain user ids to that workspace; one asked from
none (the approvals API, the MCP gateway) cannot. So, with the app installed in many
workspaces (``SIGNOFF_SLACK_MODE=oauth``), each approver of such an approval must be named
as ``USER@TEAM`` (``USER@ENTERPRISE`` on Grid); otherwise a namesake in another workspace
would be one of its approvers.
"""

from __future__ import annotations

from agent_runtime import UserError
from agent_runtime.policy import PolicySnapshot
from bot.app.settings import Settings


class UnscopedApprovers(UserError):
    """An approval asked from no workspace names approvers by user id alone."""


def require_scoped(policy: PolicySnapshot, settings: Settings, asked_by: str) -> None:
    """Refuse ``policy`` for an approval ``asked_by`` asks from no workspace if, serving many
    workspaces, it names any approver without the workspace."""
    if settings.slack_mode != "oauth":
        return
    bare = [entry for entry in (*policy.approvers, *policy.escalate_to) if "@" not in entry]
    if bare:
        raise UnscopedApprovers(
            f"{asked_by} asks from no Slack workspace and Signoff serves many "
            "(SIGNOFF_SLACK_MODE=oauth), where a user id names a person only in one: name "
            f"each approver as USER@TEAM (e.g. U0123ABC@T0456DEF), not {', '.join(bare)}"
        )
