"""Approvals asked from no Slack workspace (approvals API, MCP gateway), when Signoff serves
many workspaces: a user id names a person only within one workspace."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import Approval, ApprovalStatus, SystemClock
from bot.api.asks import Ask, read_ask
from bot.api.exceptions import BadRequest, Conflict
from bot.api.keys import create_key
from bot.api.service import ApiApprovals
from bot.slack.blocks import APPROVE
from devkit.sandbox.slack_api import Workspace
from store import ApiKey
from store.api_store import SqlApiStore
from tests.integration.home_steps import cards_on, click_home
from tests.integration.slack_harness import (
    APPROVER,
    BotInstance,
    eventually,
)
from tests.integration.slack_steps import (
    acked,
)
from tests.integration.workspaces_world import ALPHA_CODE, BETA_CODE, TwoWorkspaces, install

ALPHA_TEAM = "T0SANDBOX"
"""The team id of ``TwoWorkspaces.workspace`` (alpha)."""


def installed(tmp_path: Path, url: str, approvers: tuple[str, ...]) -> TwoWorkspaces:
    """Two workspaces, one Signoff instance in OAuth mode with ``approvers``, the app
    installed in both."""
    built = TwoWorkspaces(tmp_path, url, approvers=approvers)
    bot = built.instance()
    for code in (ALPHA_CODE, BETA_CODE):
        assert install(bot, code).status_code == 200
    return built


@pytest.fixture
def scoped(tmp_path: Path, sqlite_url: str) -> Iterator[TwoWorkspaces]:
    """The approvers named as alpha's U_DANA only (``USER@TEAM``)."""
    with installed(tmp_path, sqlite_url, (f"{APPROVER}@{ALPHA_TEAM}",)) as built:
        yield built


def api_ask(bot: BotInstance) -> tuple[ApiApprovals, ApiKey, Ask]:
    """The approvals API of ``bot``, a client of it, and a request for sign-off."""
    keys = SqlApiStore(bot.services.store.engine)
    api = ApiApprovals(bot.services, keys)
    client = create_key(keys, "deploy-bot", SystemClock().now())
    return api, api.client(client.key), read_ask({"tool": "deploy", "arguments": {"env": "prod"}})


def api_approval(bot: BotInstance) -> Approval:
    """Ask for sign-off through the approvals API, under the default approvers."""
    api, client, ask = api_ask(bot)
    approval, _ = api.create(client, ask)
    return approval


def open_home(bot: BotInstance, workspace: Workspace, user: str) -> dict[str, Any]:
    """Open ``user``'s Home tab in ``workspace`` as Slack reports it; return what is shown."""
    body = {
        "token": "legacy-verification-token",
        "team_id": workspace.team_id,
        "api_app_id": workspace.app_id,
        "type": "event_callback",
        "event_id": f"Ev{time.time_ns()}",
        "event_time": int(time.time()),
        "authorizations": [
            {"team_id": workspace.team_id, "user_id": workspace.bot_user.id, "is_bot": True}
        ],
        "event": {
            "type": "app_home_opened",
            "user": user,
            "channel": "D0HOME",
            "tab": "home",
            "event_ts": f"{time.time():.6f}",
        },
    }
    acked(bot.post(json.dumps(body).encode(), content_type="application/json"))
    shown = eventually(
        lambda: workspace.home(user), between=bot.drain, what=f"the Home tab of {user}"
    )
    return dict(shown.view)


def test_an_api_approval_with_approvers_named_by_user_id_alone_is_refused(
    tmp_path: Path, sqlite_url: str
) -> None:
    """Serving many workspaces, the approvals API refuses approvers named by user id alone
    (a namesake in any workspace would be one) with a 400 that says how to name them."""
    with installed(tmp_path, sqlite_url, (APPROVER,)) as two:
        api, client, ask = api_ask(two.instances[0])
        with pytest.raises(BadRequest, match=rf"name each approver as USER@TEAM.*not {APPROVER}"):
            api.create(client, ask)


def test_another_workspaces_namesake_cannot_see_or_decide_an_api_approval(
    scoped: TwoWorkspaces,
) -> None:
    """Beta's U_DANA, a namesake of the approver, neither sees nor decides an API approval;
    alpha's U_DANA sees it on her Home tab and decides it."""
    two = scoped
    bot = two.instances[0]
    approval = api_approval(bot)
    bot.drain()
    assert approval.id not in cards_on(open_home(bot, two.beta, APPROVER))
    alpha_home = open_home(bot, two.workspace, APPROVER)
    assert approval.id in cards_on(alpha_home)
    click_home(bot, APPROVER, alpha_home, APPROVE, approval.id, workspace=two.workspace)
    eventually(
        lambda: bot.services.approvals.get(approval.id).status == ApprovalStatus.APPROVED,
        between=bot.drain,
        what="alpha's U_DANA's approval",
    )
    decided = bot.services.approvals.get(approval.id)
    assert decided.decided_by is not None
    assert (decided.decided_by.user_id, decided.decided_by.team_id) == (APPROVER, ALPHA_TEAM)


def test_an_api_approval_naming_its_team_posts_there_and_counts_bare_ids_there(
    tmp_path: Path, sqlite_url: str
) -> None:
    """An API request naming its ``team`` and a channel there: the card is posted in that
    workspace, a bare approver id counts there only (beta's namesake cannot decide), and a
    later request of the conversation naming another team is a conflict."""
    with installed(tmp_path, sqlite_url, (APPROVER,)) as two:
        bot = two.instances[0]
        api, client, _ = api_ask(bot)
        channel = two.workspace.resolve_channel("general").id
        body = {"tool": "deploy", "arguments": {"env": "prod"}, "channel": channel}
        with pytest.raises(BadRequest, match="'channel' needs 'team'"):
            api.create(client, read_ask(body))
        approval, _ = api.create(client, read_ask(body | {"team": ALPHA_TEAM}))
        bot.drain()
        card = two.card_in(two.workspace, approval.id)
        bot.click(APPROVER, APPROVE, card, workspace=two.beta)
        bot.drain()
        assert bot.services.approvals.get(approval.id).status == ApprovalStatus.PENDING
        bot.click(APPROVER, APPROVE, card, workspace=two.workspace)
        eventually(
            lambda: bot.services.approvals.get(approval.id).status == ApprovalStatus.APPROVED,
            between=bot.drain,
            what="alpha's U_DANA's approval",
        )
        with pytest.raises(Conflict, match=f"is in workspace {ALPHA_TEAM}, not T0BETA"):
            api.create(client, read_ask(body | {"team": "T0BETA", "idempotency_key": "k2"}))
