"""How Bolt authorizes requests: one bot token, or each workspace's installation (OAuth).

Single-workspace mode answers every request with ``SLACK_BOT_TOKEN`` without asking Slack
anything (Bolt would otherwise call ``auth.test`` on the first request, and while Slack is
unreachable every request would fail). OAuth mode runs Bolt's install flow at
``/slack/install`` and ``/slack/oauth_redirect`` and reads each workspace's token, refreshed
when it rotates, from the installations in Signoff's database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import cast

from slack_bolt.authorization import AuthorizeResult
from slack_bolt.authorization.authorize import InstallationStoreAuthorize
from slack_bolt.oauth import OAuthFlow
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient
from slack_sdk.oauth.installation_store import InstallationStore
from slack_sdk.oauth.state_store import OAuthStateStore

from bot.slack.allowed import AllowedWorkspaces, AllowListFlow
from bot.slack.scopes import BOT_SCOPES

logger = logging.getLogger(__name__)

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthOptions:
    """The app's OAuth credentials and where its installations and states are kept."""

    client_id: str
    client_secret: str
    installations: InstallationStore
    states: OAuthStateStore
    redirect_uri: str = ""
    rotate_before: timedelta = timedelta(minutes=120)
    allowed: AllowedWorkspaces = field(default_factory=AllowedWorkspaces)


@dataclass(frozen=True, slots=True)
class BoltAuth:
    """What ``slack_bolt.App`` is given to authorize requests (and to install, in OAuth mode)."""

    authorize: Callable[..., AuthorizeResult]
    oauth_flow: OAuthFlow | None = None


def single_workspace(token: str) -> BoltAuth:
    """Authorize every request with the one bot token, without calling Slack."""

    def authorize(
        enterprise_id: str | None, team_id: str | None, user_id: str | None
    ) -> AuthorizeResult:
        return AuthorizeResult(
            enterprise_id=enterprise_id, team_id=team_id, user_id=user_id, bot_token=token
        )

    return BoltAuth(authorize)


def many_workspaces(options: OAuthOptions, client: WebClient) -> BoltAuth:
    """Bolt's install flow and per-workspace authorization over Signoff's stores."""
    minutes = int(options.rotate_before.total_seconds() // 60)
    settings = OAuthSettings(
        client_id=options.client_id,
        client_secret=options.client_secret,
        scopes=list(BOT_SCOPES),
        installation_store=options.installations,
        installation_store_bot_only=True,
        state_store=options.states,
        install_path=INSTALL_PATH,
        install_page_rendering_enabled=False,
        redirect_uri_path=REDIRECT_PATH,
        redirect_uri=options.redirect_uri or None,
        token_rotation_expiration_minutes=minutes,
    )
    authorize = InstallationStoreAuthorize(
        logger=logger,
        installation_store=options.installations,
        client_id=options.client_id,
        client_secret=options.client_secret,
        token_rotation_expiration_minutes=minutes,
        bot_only=True,
        client=client,
    )
    flow = AllowListFlow(client=client, logger=logger, settings=settings, allowed=options.allowed)
    # an Authorize instance is what Bolt calls; its annotations only name plain functions
    return BoltAuth(cast("Callable[..., AuthorizeResult]", authorize), flow)


__all__ = [
    "INSTALL_PATH",
    "REDIRECT_PATH",
    "BoltAuth",
    "OAuthOptions",
    "many_workspaces",
    "single_workspace",
]
