"""The parts that differ between single-workspace mode and OAuth (many workspaces) mode."""

from __future__ import annotations

from slack_sdk import WebClient

from agent_runtime import SystemClock
from bot.app.settings import Settings
from bot.app.wiring import Services
from bot.slack.allowed import AllowedWorkspaces
from bot.slack.installations import SignoffInstallationStore, SignoffStateStore
from bot.slack.oauth import BoltAuth, OAuthOptions, many_workspaces, single_workspace
from bot.slack.token_cipher import TokenCipher
from bot.slack.uninstalls import Uninstalls
from bot.slack.workspaces import InstalledWorkspaces, OneWorkspace, WorkspaceClients


def web_client(settings: Settings) -> WebClient:
    """The Slack Web API client, pointed at ``SIGNOFF_SLACK_API_URL`` (with the bot token in
    single-workspace mode; OAuth mode finds each workspace's token when it calls)."""
    return WebClient(token=settings.slack_bot_token or None, base_url=settings.slack_api_url)


def allowed_workspaces(settings: Settings) -> AllowedWorkspaces:
    """The workspaces and organizations that may install and use the app (empty: any)."""
    return AllowedWorkspaces(
        teams=frozenset(settings.allowed_teams),
        enterprises=frozenset(settings.allowed_enterprises),
    )


def installations(services: Services) -> SignoffInstallationStore:
    """The workspaces' installations, in the database."""
    cipher = TokenCipher(services.settings.token_keys)
    return SignoffInstallationStore(services.stores.installations, SystemClock(), cipher)


def bolt_auth(services: Services, client: WebClient) -> BoltAuth:
    """How the Bolt app authorizes requests in the configured mode."""
    settings = services.settings
    if not settings.is_oauth:
        return single_workspace(settings.slack_bot_token)
    options = OAuthOptions(
        client_id=settings.slack_client_id,
        client_secret=settings.slack_client_secret,
        installations=installations(services),
        states=SignoffStateStore(services.stores.installations, SystemClock()),
        redirect_uri=settings.slack_redirect_uri,
        rotate_before=settings.slack_token_rotation,
        allowed=allowed_workspaces(settings),
    )
    return many_workspaces(options, client)


def uninstalls(services: Services) -> Uninstalls | None:
    """What handles a workspace removing the app (OAuth mode only)."""
    if not services.settings.is_oauth:
        return None
    return Uninstalls(
        services.runtime, services.approvals, installations(services), services.stores.home_tabs
    )


def workspace_clients(services: Services, client: WebClient) -> WorkspaceClients:
    """Where the dispatcher finds the bot token of each notice's workspace."""
    settings = services.settings
    if not settings.is_oauth:
        return OneWorkspace(client)
    return InstalledWorkspaces(
        installations(services),
        client,
        client_id=settings.slack_client_id,
        client_secret=settings.slack_client_secret,
        rotate_before=settings.slack_token_rotation,
    )


__all__ = [
    "allowed_workspaces",
    "bolt_auth",
    "installations",
    "uninstalls",
    "workspace_clients",
]
