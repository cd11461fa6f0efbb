"""Steps of the Home tab scenarios: open it as Slack reports it, read what was published,
click its buttons as Slack sends them."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from devkit.sandbox.slack_api import Workspace
from tests.integration.slack_harness import (
    PEOPLE,
    Ack,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_steps import (
    acked,
)

JSON = "application/json"


def open_home(bot: BotInstance, user: str, *, team: str | None = None) -> Ack:
    """Send the signed ``app_home_opened`` event of ``user`` opening the Home tab."""
    ws = bot.world.workspace
    team = team or ws.team_id
    body = {
        "token": "legacy-verification-token",
        "team_id": team,
        "api_app_id": ws.app_id,
        "type": "event_callback",
        "event_id": f"Ev{time.time_ns()}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": team, "user_id": ws.bot_user.id, "is_bot": True}],
        "event": {
            "type": "app_home_opened",
            "user": user,
            "channel": "D0HOME",
            "tab": "home",
            "event_ts": f"{time.time():.6f}",
        },
    }
    return acked(bot.post(json.dumps(body).encode(), content_type=JSON))


def published(
    world: SlackWorld, user: str, after: int, bot: BotInstance, *, saying: str | None = None
) -> dict[str, Any]:
    """Wait for a ``views.publish`` to ``user`` beyond the first ``after`` (one whose blocks
    hold ``saying``, if given: a refresh another change queued may come first); return its
    view as sent, having checked it with slack_sdk's models."""

    def probe() -> list[Any]:
        calls = [c for c in world.successful("views.publish") if c.params["user_id"] == user]
        return [c for c in calls[after:] if saying is None or saying in _view_text(c)]

    view = eventually(probe, between=bot.drain, what=f"the Home tab of {user}")[-1].params["view"]
    view = json.loads(view) if isinstance(view, str) else view
    View(**view).validate_json()
    for block in view["blocks"]:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.validate_json()
    return dict(view)


def _view_text(call: Any) -> str:
    view = call.params["view"]
    return view if isinstance(view, str) else json.dumps(view, ensure_ascii=False)


def latest(world: SlackWorld, user: str) -> dict[str, Any]:
    """The view last published to ``user`` (an empty one if none was)."""
    calls = [c for c in world.successful("views.publish") if c.params["user_id"] == user]
    if not calls:
        return {"blocks": []}
    view = calls[-1].params["view"]
    return dict(json.loads(view) if isinstance(view, str) else view)


def publishes(world: SlackWorld, user: str) -> int:
    """How many times ``user``'s Home tab was published."""
    return sum(1 for c in world.successful("views.publish") if c.params["user_id"] == user)


def cards_on(view: dict[str, Any]) -> list[str]:
    """The approval ids whose buttons the view shows, in order."""
    return [
        b["block_id"].removeprefix("approval:")
        for b in view["blocks"]
        if b["type"] == "actions" and b.get("block_id", "").startswith("approval:")
    ]


def texts(view: dict[str, Any]) -> str:
    """Everything the view says, as JSON text."""
    return json.dumps(view["blocks"], ensure_ascii=False)


def click_home(
    bot: BotInstance,
    user: str,
    view: dict[str, Any],
    action_id: str,
    approval_id: str,
    *,
    workspace: Workspace | None = None,
) -> Ack:
    """Click a button of an approval on ``user``'s Home tab (in ``workspace``, by default the
    world's), as Slack sends it (the view, no channel, no response_url)."""
    ws = workspace or bot.world.workspace
    shown = ws.home(user)
    assert shown is not None
    [block] = [b for b in view["blocks"] if b.get("block_id") == f"approval:{approval_id}"]
    [button] = [e for e in block["elements"] if e["action_id"] == action_id]
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": PEOPLE[user], "name": PEOPLE[user], "team_id": ws.team_id},
        "api_app_id": ws.app_id,
        "token": "legacy-verification-token",
        "container": {"type": "view", "view_id": shown.id},
        "trigger_id": ws.issue_trigger(user),
        "team": {"id": ws.team_id, "domain": ws.domain},
        "enterprise": None,
        "is_enterprise_install": False,
        "view": shown.view | {"blocks": view["blocks"]},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": block["block_id"],
                "text": button["text"],
                "value": button["value"],
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return acked(bot.post(urlencode({"payload": json.dumps(payload)}).encode()))
