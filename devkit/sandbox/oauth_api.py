"""Several sandbox workspaces behind one Web API URL, and Slack's OAuth token exchange.

Calls are routed to a workspace by their bot token; ``auth.revoke`` ends the token it is
called with. ``oauth.v2.access`` (HTTP Basic client
credentials, as slack_sdk sends them) trades a one-time install code for a workspace's bot
token, and, for workspaces installed with token rotation, a refresh token for a new access
token. Stricter than Slack, a refreshed token stops working at once (Slack lets it live out
its time), so that a test sees which token each call carries.
"""

from __future__ import annotations

import base64
import itertools
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from devkit.sandbox.records import JsonObject
from devkit.sandbox.web_api import ApiResponse, SlackWebApi, _text, bearer_token
from devkit.sandbox.workspace import Workspace

ROTATING_TTL_S = 12 * 3600
"""How long a rotating token lives, as on Slack."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What an install code (or a refresh token) is worth: a workspace (or a whole Grid
    organization), how it rotates (and, for a refresh token, the access token it replaces)."""

    api: SlackWebApi
    enterprise_id: str | None
    rotating: bool
    expires_in: int
    replaces: str = ""
    org_wide: bool = False


class WorkspacesApi(SlackWebApi):
    """Workspaces told apart by token, installable through ``oauth.v2.access``."""

    def __init__(self, *, client_id: str, client_secret: str) -> None:
        super().__init__(Workspace(team_id="T0NOBODY"), tokens=())
        self.client_id = client_id
        self.client_secret = client_secret
        self._lock = threading.Lock()
        self._by_token: dict[str, SlackWebApi] = {}
        self._codes: dict[str, Grant] = {}
        self._refresh: dict[str, Grant] = {}
        self._serial = itertools.count(1)
        self.exchanges: list[str] = []
        """The grant types of the ``oauth.v2.access`` calls answered, in order."""
        self.revoked: list[str] = []
        """The team ids whose token ``auth.revoke`` revoked, in order."""

    def add(
        self,
        workspace: Workspace,
        *,
        code: str,
        enterprise_id: str | None = None,
        org_wide: bool = False,
        rotating: bool = False,
        expires_in: int = ROTATING_TTL_S,
    ) -> SlackWebApi:
        """Serve ``workspace``; ``code`` installs the app there (once). With ``org_wide``, the
        install is for the whole organization ``enterprise_id`` (Slack then names no team), and
        ``workspace`` holds the channels of all its workspaces."""
        api = SlackWebApi(workspace, tokens=())
        self._codes[code] = Grant(api, enterprise_id, rotating, expires_in, org_wide=org_wide)
        return api

    def revoke(self, workspace: Workspace) -> None:
        """Invalidate every token of ``workspace`` (the app uninstalled)."""
        with self._lock:
            for token, api in list(self._by_token.items()):
                if api.workspace is workspace:
                    del self._by_token[token]
                    api.tokens = api.tokens - {token}

    def handle(
        self, method: str, params: Mapping[str, Any], *, authorization: str | None = None
    ) -> ApiResponse:
        """Answer ``oauth.v2.access`` here and every other call in the token's workspace."""
        if method == "oauth.v2.access":
            return self._oauth(params, authorization)
        token = bearer_token(authorization) or _text(params, "token") or ""
        with self._lock:
            api = self._by_token.get(token)
            if api is not None and method == "auth.revoke":
                del self._by_token[token]
                api.tokens = api.tokens - {token}
                self.revoked.append(api.workspace.team_id)
                return ApiResponse(200, {"ok": True, "revoked": True})
        if api is None:
            return super().handle(method, params, authorization=authorization)
        return api.handle(method, params, authorization=authorization)

    def _oauth(self, params: Mapping[str, Any], authorization: str | None) -> ApiResponse:
        if not self._client_authenticated(params, authorization):
            return ApiResponse(200, {"ok": False, "error": "invalid_client_id"})
        grant_type = _text(params, "grant_type") or "authorization_code"
        with self._lock:
            self.exchanges.append(grant_type)
            if grant_type == "refresh_token":
                grant = self._refresh.pop(_text(params, "refresh_token") or "", None)
            else:
                grant = self._codes.pop(_text(params, "code") or "", None)
            if grant is None:
                error = "invalid_refresh_token" if grant_type == "refresh_token" else "invalid_code"
                return ApiResponse(200, {"ok": False, "error": error})
            return ApiResponse(200, {"ok": True, **self._issue(grant)})

    def _issue(self, grant: Grant) -> JsonObject:
        """A new bot token for the grant's workspace (and a refresh token if it rotates)."""
        ws, serial = grant.api.workspace, next(self._serial)
        prefix = "xoxe.xoxb" if grant.rotating else "xoxb"
        token = f"{prefix}-{ws.team_id}-{serial}"
        grant.api.tokens = (grant.api.tokens - {grant.replaces}) | {token}
        self._by_token.pop(grant.replaces, None)
        self._by_token[token] = grant.api
        answer: JsonObject = {
            "access_token": token,
            "token_type": "bot",
            "scope": ",".join(grant.api.scopes),
            "bot_user_id": ws.bot_user.id,
            "app_id": ws.app_id,
            "team": None if grant.org_wide else {"id": ws.team_id, "name": ws.team_name},
            "enterprise": {"id": grant.enterprise_id} if grant.enterprise_id else None,
            "is_enterprise_install": grant.org_wide,
            "authed_user": {"id": "U0INSTALLER"},
        }
        if grant.rotating:
            refresh = f"xoxe-1-{ws.team_id}-{serial}"
            self._refresh[refresh] = replace(grant, replaces=token)
            answer |= {"refresh_token": refresh, "expires_in": grant.expires_in}
        return answer

    def _client_authenticated(self, params: Mapping[str, Any], authorization: str | None) -> bool:
        scheme, _, encoded = (authorization or "").partition(" ")
        if scheme.lower() == "basic":
            try:
                given = base64.b64decode(encoded).decode()
            except ValueError:
                return False
        else:
            given = f"{_text(params, 'client_id')}:{_text(params, 'client_secret')}"
        return given == f"{self.client_id}:{self.client_secret}"


__all__ = ["ROTATING_TTL_S", "WorkspacesApi"]
