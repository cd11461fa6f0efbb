"""A Slack world with two workspaces behind one fake Web API, Signoff in OAuth mode.

The two workspaces have people with the same user id strings (``U_DANA`` is an approver's id
in both), as two unrelated Slack workspaces may. The app is installed in each through the
real install flow: ``/slack/install``, then ``/slack/oauth_redirect`` with the code the
fake's ``oauth.v2.access`` takes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import requests
from cryptography.fernet import Fernet

from bot.app.settings import Settings
from devkit.sandbox.oauth_api import ROTATING_TTL_S, WorkspacesApi
from devkit.sandbox.server import start_api
from devkit.sandbox.slack_api import Message, Workspace
from tests.integration.slack_harness import (
    APPROVER,
    HTTP_TIMEOUT_S,
    PEOPLE,
    SIGNING_SECRET,
    UNPACED,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import is_card_of

CLIENT_ID = "1111.2222"
CLIENT_SECRET = "oauth-client-secret-of-the-tests"
STATE_COOKIE = "slack-app-oauth-state"
TOKEN_KEY = Fernet.generate_key().decode()
"""The key the installations' tokens are encrypted with."""
ALPHA_CODE, BETA_CODE = "code-for-alpha", "code-for-beta"


class TwoWorkspaces(SlackWorld):
    """``workspace`` (alpha, the harness's default) and ``beta``, installed by OAuth."""

    def __init__(
        self,
        tmp_path: Path,
        database_url: str,
        *,
        approvers: Sequence[str] = (APPROVER,),
        beta_token_lifetime: int = ROTATING_TTL_S,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        """``beta`` is installed with token rotation, its tokens living ``beta_token_lifetime``
        seconds; ``extra`` variables are added to each instance's environment (and may be
        changed before starting the next)."""
        super().__init__(tmp_path, database_url, approvers=approvers)
        self.extra = dict(extra or {})
        self.slack.stop()
        self.beta = Workspace(team_id="T0BETA", team_name="Beta", domain="beta")
        for user_id, name in PEOPLE.items():
            self.beta.add_user(name, user_id=user_id)
        self.oauth = WorkspacesApi(client_id=CLIENT_ID, client_secret=CLIENT_SECRET)
        self.oauth.add(self.workspace, code=ALPHA_CODE)
        self.oauth.add(self.beta, code=BETA_CODE, rotating=True, expires_in=beta_token_lifetime)
        self.slack = start_api(self.oauth)

    def settings(self) -> Settings:
        """Signoff in OAuth mode against the fake."""
        return Settings.from_env(self.environment())

    def environment(self) -> dict[str, str]:
        """The variables of a Signoff process in OAuth mode against the fake."""
        return {
            "SIGNOFF_DATABASE_URL": self.database_url,
            "SIGNOFF_DEMO": "1",
            "SIGNOFF_APPROVERS": ",".join(self.approvers),
            "SIGNOFF_DEMO_PROVIDER_URL": self.provider.url,
            "SIGNOFF_SLACK_API_URL": self.slack.api_url,
            "SIGNOFF_SLACK_MODE": "oauth",
            "SLACK_CLIENT_ID": CLIENT_ID,
            "SLACK_CLIENT_SECRET": CLIENT_SECRET,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SIGNOFF_TOKEN_ENCRYPTION_KEY": TOKEN_KEY,
            **UNPACED,
            **self.extra,
        }

    def __enter__(self) -> TwoWorkspaces:
        return self

    def card_in(self, workspace: Workspace, approval_id: str) -> Message:
        """Return the card of ``approval_id`` in the run threads of ``workspace``'s #general."""
        channel = workspace.resolve_channel("general").id
        found = [
            m
            for root in workspace.messages(channel)
            for m in [root, *workspace.messages(channel, thread_ts=root.ts)]
            if is_card_of(m, approval_id)
        ]
        assert len(found) == 1, f"{len(found)} cards of {approval_id} in {workspace.team_id}"
        return found[0]


def install(bot: BotInstance, code: str) -> requests.Response:
    """Go through the install flow as a browser would; return the redirect's answer."""
    base = bot.url.removesuffix("/slack/events")
    with requests.Session() as http:
        http.trust_env = False
        started = http.get(f"{base}/slack/install", allow_redirects=False, timeout=HTTP_TIMEOUT_S)
        assert started.status_code == 302, started.text
        query = parse_qs(urlsplit(started.headers["Location"]).query)
        assert query["client_id"] == [CLIENT_ID]
        [state] = query["state"]
        # the state cookie is Secure (Slack apps are served over https): sent by hand here
        return http.get(
            f"{base}/slack/oauth_redirect",
            params={"code": code, "state": state},
            headers={"Cookie": f"{STATE_COOKIE}={state}"},
            allow_redirects=False,
            timeout=HTTP_TIMEOUT_S,
        )


def on_grid(body: bytes, *, enterprise: str, team: str | None) -> bytes:
    """Return a command's or click's form body as an organization-wide install on Enterprise
    Grid sends it: from ``enterprise``, from workspace ``team`` of it (or naming none)."""
    form = {k: v for k, [v] in parse_qs(body.decode(), keep_blank_values=True).items()}
    if "payload" not in form:
        grid = {"enterprise_id": enterprise, "enterprise_name": enterprise}
        grid |= {"team_id": team or "", "is_enterprise_install": "true"}
        return urlencode({**form, **grid}).encode()
    payload = json.loads(form["payload"])
    payload["enterprise"] = {"id": enterprise, "name": enterprise}
    payload["is_enterprise_install"] = True
    payload["team"] = None if team is None else {"id": team, "domain": team.lower()}
    payload["user"]["team_id"] = team or ""
    return urlencode({"payload": json.dumps(payload)}).encode()
