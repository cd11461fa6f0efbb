"""When a workspace removes the app (``app_uninstalled``, or its bot token revoked).

The workspace's installation is forgotten, and every run of that workspace that waits on a
person is cancelled with its pending approvals (fail-closed: nobody there could ever see or
decide them now), the reason recorded with each approval closed. Then the Home tabs opened
there are forgotten and its Home notices not yet being sent dropped (those the cancellations
just queued included): nothing is published there again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from slack_bolt import BoltContext
from slack_sdk.oauth.installation_store import InstallationStore

from agent_runtime import Actor, Approval, Approvals, ApprovalStatus, RunId, Runtime, SignoffError
from bot.slack.home import HOME
from store import HOME_REFRESH

logger = logging.getLogger(__name__)

REMOVED = Actor(user_id="signoff", name="Signoff (the app was removed from the Slack workspace)")
PAGE = 100
HOME_KINDS = (HOME, HOME_REFRESH)
"""The notices that publish a person's Home tab."""


class WorkspaceHomeTabs(Protocol):
    """Forgets the Home tabs opened in a workspace, and the notices that publish them."""

    def forget_workspace(self, enterprise_id: str, team_id: str, kinds: Sequence[str]) -> int:
        """Forget the workspace's tabs and drop its notices of ``kinds`` not yet being sent;
        return how many tabs."""
        ...


class Uninstalls:
    """Handles the events Slack sends when a workspace removes the app."""

    def __init__(
        self,
        runtime: Runtime,
        approvals: Approvals,
        installations: InstallationStore,
        home_tabs: WorkspaceHomeTabs,
    ) -> None:
        self._runtime = runtime
        self._approvals = approvals
        self._installations = installations
        self._home_tabs = home_tabs

    def app_uninstalled(self, context: BoltContext) -> None:
        """The app was uninstalled from the workspace."""
        self.removed(context.enterprise_id or "", context.team_id or "")

    def tokens_revoked(self, event: dict[str, Any], context: BoltContext) -> None:
        """Tokens were revoked: without its bot token Signoff cannot work in the workspace."""
        if (event.get("tokens") or {}).get("bot"):
            self.removed(context.enterprise_id or "", context.team_id or "")

    def removed(self, enterprise_id: str, team_id: str) -> int:
        """Forget the workspace, fail its waiting runs closed and forget its Home tabs; return
        how many runs ended."""
        self._installations.delete_all(enterprise_id=enterprise_id or None, team_id=team_id or None)
        ended = {a.run_id for a in self._pending() if _in(a, enterprise_id, team_id)}
        for run_id in sorted(ended):
            try:
                self._runtime.cancel(RunId(run_id), by=REMOVED)
            except SignoffError:
                continue  # ended meanwhile
        tabs = self._home_tabs.forget_workspace(enterprise_id, team_id, HOME_KINDS)
        logger.warning(
            "slack workspace removed the app; its waiting runs were cancelled",
            extra={
                "action": "uninstall",
                "workspace": team_id or enterprise_id,
                "runs": len(ended),
                "home_tabs": tabs,
            },
        )
        return len(ended)

    def _pending(self) -> list[Approval]:
        found: list[Approval] = []
        while True:
            page = self._approvals.store.list_approvals(
                status=ApprovalStatus.PENDING, limit=PAGE, after=found[-1].id if found else None
            )
            found += page
            if len(page) < PAGE:
                return found


def _in(approval: Approval, enterprise_id: str, team_id: str) -> bool:
    """Whether the approval's run is from the workspace (any of the organization's if
    ``team_id`` is empty: an organization-wide installation)."""
    requester = approval.requester
    if team_id:
        return requester.team_id == team_id
    return bool(enterprise_id) and requester.enterprise_id == enterprise_id


__all__ = ["HOME_KINDS", "REMOVED", "Uninstalls", "WorkspaceHomeTabs"]
