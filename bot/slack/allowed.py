"""Which Slack workspaces and Grid organizations may use the app, and refusing the others.

``SIGNOFF_ALLOWED_TEAMS`` and ``SIGNOFF_ALLOWED_ENTERPRISES`` list them; with both empty,
any workspace may. Otherwise a workspace is allowed when its team is listed or it belongs to
a listed organization (an organization-wide install names no team: only its organization
counts). An install from elsewhere is refused at the OAuth redirect, before anything is
stored, and the token Slack issued for it is revoked; a command, click or event from
elsewhere is answered without being handled (only the app's removal from a workspace is
always handled, as it only forgets).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt import BoltResponse
from slack_bolt.error import BoltError
from slack_bolt.oauth import OAuthFlow
from slack_bolt.oauth.callback_options import FailureArgs
from slack_bolt.request import BoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.oauth.installation_store import Installation

logger = logging.getLogger(__name__)

REFUSED = "Signoff is not enabled for this Slack workspace."
"""What a person in a workspace that is not allowed is told (slash commands show it)."""
REMOVALS = frozenset({"app_uninstalled", "tokens_revoked"})


@dataclass(frozen=True, slots=True, kw_only=True)
class AllowedWorkspaces:
    """The teams and organizations allowed; both empty: any."""

    teams: frozenset[str] = frozenset()
    enterprises: frozenset[str] = frozenset()

    @property
    def anyone(self) -> bool:
        """Whether every workspace is allowed."""
        return not self.teams and not self.enterprises

    def admits(self, team_id: str | None, enterprise_id: str | None) -> bool:
        """Whether the workspace ``team_id`` (of organization ``enterprise_id``) is allowed."""
        if self.anyone:
            return True
        return bool(team_id and team_id in self.teams) or bool(
            enterprise_id and enterprise_id in self.enterprises
        )


class WorkspaceNotAllowed(BoltError):
    """An install from a workspace or organization that is not allowed: nothing is stored."""

    def __init__(self, team_id: str, enterprise_id: str) -> None:
        super().__init__(f"workspace {team_id or enterprise_id!r} may not install the app")
        self.team_id = team_id
        self.enterprise_id = enterprise_id


class AllowListFlow(OAuthFlow):
    """Bolt's install flow, refusing to keep an installation from a workspace not allowed."""

    def __init__(self, *, allowed: AllowedWorkspaces, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.allowed = allowed
        self._other_failures = self.failure_handler
        self.failure_handler = self._failure

    def store_installation(self, request: BoltRequest, installation: Installation) -> None:
        """Keep the installation, or raise ``WorkspaceNotAllowed`` without keeping it."""
        team = "" if installation.is_enterprise_install else installation.team_id or ""
        enterprise = installation.enterprise_id or ""
        if not self.allowed.admits(team, enterprise):
            logger.warning(
                "install refused: workspace not allowed",
                extra={"action": "install", "workspace": team, "enterprise": enterprise},
            )
            self._revoke(installation.bot_token)
            raise WorkspaceNotAllowed(team, enterprise)
        super().store_installation(request, installation)

    def _revoke(self, token: str | None) -> None:
        """Give back the token Slack just issued, so the app is not left installed there."""
        if not token:
            return
        try:
            self.client.auth_revoke(token=token)
        except (SlackApiError, OSError) as exc:
            logger.warning(
                "refused install's token not revoked",
                extra={"action": "install", "error": type(exc).__name__},
            )

    def _failure(self, args: FailureArgs) -> BoltResponse:
        """The refusal page for a workspace not allowed; Bolt's page for anything else."""
        if isinstance(args.error, WorkspaceNotAllowed):
            return refusal_page(args.error)
        return self._other_failures(args)


def refusal_page(refused: WorkspaceNotAllowed) -> BoltResponse:
    """The page a person installing from a workspace that is not allowed sees."""
    where = refused.team_id or refused.enterprise_id
    body = (
        "<html><head><title>Not installed</title></head><body>"
        "<h2>Signoff was not installed</h2>"
        f"<p>This Slack workspace ({html.escape(where)}) is not one this Signoff serves, "
        "so nothing was installed. Ask the people who run Signoff to allow it.</p>"
        "</body></html>"
    )
    return BoltResponse(status=403, body=body, headers={"Content-Type": "text/html; charset=utf-8"})


def refuse_other_workspaces(allowed: AllowedWorkspaces) -> Callable[..., BoltResponse]:
    """Bolt middleware answering requests from a workspace not allowed without handling them."""

    def middleware(request: Any, next: Callable[[], BoltResponse]) -> BoltResponse:
        context = request.context
        if allowed.admits(context.team_id, context.enterprise_id) or _removal(request.body):
            return next()
        logger.warning(
            "request refused: workspace not allowed",
            extra={
                "action": "refuse",
                "workspace": context.team_id or "",
                "enterprise": context.enterprise_id or "",
            },
        )
        return BoltResponse(status=200, body=REFUSED)

    return middleware


def _removal(body: dict[str, Any]) -> bool:
    """Whether the request tells of the app's removal from a workspace."""
    event = body.get("event") if isinstance(body, dict) else None
    return isinstance(event, dict) and event.get("type") in REMOVALS


__all__ = [
    "REFUSED",
    "AllowListFlow",
    "AllowedWorkspaces",
    "WorkspaceNotAllowed",
    "refuse_other_workspaces",
]
