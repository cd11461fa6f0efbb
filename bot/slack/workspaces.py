"""Which bot token to call Slack with for a workspace.

In single-workspace mode it is always ``SLACK_BOT_TOKEN``. In OAuth mode it is the token of
the workspace's installation, refreshed first when it rotates and is about to expire.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from slack_sdk import WebClient
from slack_sdk.oauth.installation_store import Bot, InstallationStore
from slack_sdk.oauth.token_rotation import TokenRotator


class NotInstalled(Exception):
    """The app is not (or no longer) installed in the workspace: nothing can be sent there."""

    def __init__(self, team_id: str, enterprise_id: str) -> None:
        super().__init__(f"the app is not installed in workspace {team_id or enterprise_id!r}")
        self.team_id = team_id
        self.enterprise_id = enterprise_id


class WorkspaceClients(Protocol):
    """Gives a Web API client holding the bot token of a workspace."""

    def client_for(self, team_id: str, enterprise_id: str) -> WebClient:
        """Return a client for the workspace, or raise ``NotInstalled``."""
        ...


class OneWorkspace:
    """Single-workspace mode: the one client, whatever the workspace."""

    def __init__(self, client: WebClient) -> None:
        self._client = client

    def client_for(self, team_id: str, enterprise_id: str) -> WebClient:
        """Return the one client."""
        return self._client


class InstalledWorkspaces:
    """OAuth mode: each workspace's installation token, rotated when it is about to expire."""

    def __init__(
        self,
        installations: InstallationStore,
        client: WebClient,
        *,
        client_id: str,
        client_secret: str,
        rotate_before: timedelta,
    ) -> None:
        self._installations = installations
        self._client = client
        self._rotator = TokenRotator(
            client_id=client_id, client_secret=client_secret, client=client
        )
        self._rotate_before = rotate_before

    def client_for(self, team_id: str, enterprise_id: str) -> WebClient:
        """Return a client with the workspace's bot token, or raise ``NotInstalled``."""
        bot = self._installations.find_bot(
            enterprise_id=enterprise_id or None, team_id=team_id or None
        )
        if bot is None:
            raise NotInstalled(team_id, enterprise_id)
        token = self._fresh(bot).bot_token
        return WebClient(token=token, base_url=self._client.base_url, logger=self._client.logger)

    def _fresh(self, bot: Bot) -> Bot:
        """The bot with a token valid for a while yet (rotated and saved if it was not)."""
        if not bot.bot_refresh_token:
            return bot
        rotated = self._rotator.perform_bot_token_rotation(
            bot=bot, minutes_before_expiration=int(self._rotate_before.total_seconds() // 60)
        )
        if rotated is None:
            return bot
        self._installations.save_bot(rotated)
        return rotated


__all__ = ["InstalledWorkspaces", "NotInstalled", "OneWorkspace", "WorkspaceClients"]
