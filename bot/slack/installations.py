"""slack_sdk's installation and OAuth state stores over Signoff's own database.

Bolt's OAuth flow saves each workspace's installation here and reads its bot token back for
every request; the outbox dispatcher reads it for every notice (``bot.slack.workspaces``).
Tokens are kept encrypted (``bot.slack.token_cipher``): a copy of the database gives none.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from slack_sdk.oauth.installation_store import Bot, Installation, InstallationStore
from slack_sdk.oauth.state_store import OAuthStateStore

from agent_runtime import Clock
from bot.slack.token_cipher import TokenCipher, TokenUnreadable
from store import SqlInstallations

logger = logging.getLogger(__name__)

STATE_TTL = timedelta(minutes=10)
"""How long a person has between opening ``/slack/install`` and coming back from Slack."""
SCOPE_LISTS = ("bot_scopes", "user_scopes")


def workspace_key(
    enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
) -> tuple[str, str]:
    """The (enterprise, team) an installation is kept under: an organization-wide one under
    its enterprise alone."""
    return enterprise_id or "", "" if is_enterprise_install else team_id or ""


class SignoffInstallationStore(InstallationStore):
    """One installation per workspace (or Grid organization), kept in ``slack_installations``."""

    def __init__(self, installations: SqlInstallations, clock: Clock, cipher: TokenCipher) -> None:
        self._rows = installations
        self._clock = clock
        self._cipher = cipher

    @property
    def logger(self) -> logging.Logger:
        """The logger slack_sdk expects."""
        return logger

    def all(self) -> list[Installation]:
        """Return every installation, oldest first."""
        return [Installation(**self._cipher.open(data)) for data in self._rows.all()]

    def save(self, installation: Installation) -> None:
        """Keep the installation (a new one, or a rotated token) for its workspace."""
        key = workspace_key(
            installation.enterprise_id, installation.team_id, installation.is_enterprise_install
        )
        self._rows.save(*key, self._cipher.seal(_json(installation)), self._clock.now())
        logger.info(
            "slack installation saved",
            extra={"action": "install", "workspace": key[1] or key[0]},
        )

    def save_bot(self, bot: Bot) -> None:
        """Keep a rotated bot token in the workspace's installation."""
        found = self._find(bot.enterprise_id, bot.team_id, bot.is_enterprise_install)
        if found is None:
            return
        found.bot_token = bot.bot_token
        found.bot_refresh_token = bot.bot_refresh_token
        found.bot_token_expires_at = bot.bot_token_expires_at
        self.save(found)

    def rekey(self) -> tuple[int, int]:
        """Rewrite, in one transaction, each installation with a token not under the newest
        key (an older key's, or one kept in clear); return how many were rewritten, of how
        many. Raise ``TokenUnreadable`` naming the workspace, rewriting none, if a token
        cannot be read with any key."""
        return self._rows.rewrite(_resealed_with(self._cipher))

    def find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        """Return the workspace's installation (whoever installed it)."""
        return self._find(enterprise_id, team_id, is_enterprise_install)

    def find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        """Return the workspace's bot."""
        found = self._find(enterprise_id, team_id, is_enterprise_install)
        return None if found is None or not found.bot_token else found.to_bot()

    def delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        """Forget the workspace's installation (a user's own is all there is)."""
        if user_id is None:
            self._delete(enterprise_id, team_id)

    def delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """Forget the workspace's installation: without its bot Signoff cannot work there."""
        self._delete(enterprise_id, team_id)

    def _find(
        self, enterprise_id: str | None, team_id: str | None, org_wide: bool | None
    ) -> Installation | None:
        data = self._rows.find(*workspace_key(enterprise_id, team_id, org_wide))
        if data is None and enterprise_id and not org_wide:
            data = self._rows.find(*workspace_key(enterprise_id, team_id, True))
        return None if data is None else Installation(**self._cipher.open(data))

    def _delete(self, enterprise_id: str | None, team_id: str | None) -> None:
        removed = self._rows.delete(*workspace_key(enterprise_id, team_id))
        if not removed and enterprise_id:
            removed = self._rows.delete(*workspace_key(enterprise_id, team_id, True))
        logger.info(
            "slack installation removed",
            extra={"action": "uninstall", "workspace": team_id or enterprise_id, "found": removed},
        )


class SignoffStateStore(OAuthStateStore):
    """OAuth states kept in ``slack_oauth_states``: each good once, for ``STATE_TTL``."""

    def __init__(self, installations: SqlInstallations, clock: Clock) -> None:
        self._rows = installations
        self._clock = clock

    @property
    def logger(self) -> logging.Logger:
        """The logger slack_sdk expects."""
        return logger

    def issue(self, *args: Any, **kwargs: Any) -> str:
        """Return a new random state."""
        state = uuid.uuid4().hex
        now = self._clock.now()
        self._rows.issue_state(state, now + STATE_TTL, now)
        return state

    def consume(self, state: str) -> bool:
        """Use the state up: True once, if it was issued here and has not expired."""
        return self._rows.consume_state(state[:80], self._clock.now())


def _resealed_with(cipher: TokenCipher) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """``cipher.resealed``, its ``TokenUnreadable`` naming the installation's workspace."""

    def resealed(data: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return cipher.resealed(data)
        except TokenUnreadable as exc:
            where = str(data.get("team_id") or data.get("enterprise_id") or "")
            raise TokenUnreadable(exc.field, where) from None

    return resealed


def _json(installation: Installation) -> dict[str, Any]:
    """The installation's standard fields as JSON (times as ISO strings, scopes as text)."""
    data = installation.to_dict_for_copying()
    data.pop("custom_values", None)
    for name, value in data.items():
        if isinstance(value, datetime):
            data[name] = value.isoformat()
    for name in SCOPE_LISTS:
        data[name] = data.get(name) or ""
    return data


__all__ = ["STATE_TTL", "SignoffInstallationStore", "SignoffStateStore", "workspace_key"]
