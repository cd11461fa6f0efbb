"""Reading what a Slack interaction carries: the clicked value, the person, a modal's input."""

from __future__ import annotations

from typing import Any

from agent_runtime import Actor


def click(body: dict[str, Any]) -> tuple[str, Actor]:
    """Return the clicked button's value and who clicked."""
    return str(body["actions"][0]["value"]), actor_of(body)


def actor_of(body: dict[str, Any]) -> Actor:
    """The person who clicked or submitted, with their workspace (and Grid organization)."""
    user = body["user"]
    return Actor(
        user_id=user["id"],
        team_id=user.get("team_id") or (body.get("team") or {}).get("id") or "",
        name=user.get("username") or user.get("name") or "",
        enterprise_id=(body.get("enterprise") or {}).get("id") or "",
    )


def input_value(view: dict[str, Any], block: str) -> str:
    """Return the text a modal's input block ``block`` holds ("" if none)."""
    field = (((view.get("state") or {}).get("values") or {}).get(block) or {}).get("value")
    value = field.get("value") if isinstance(field, dict) else None
    return value if isinstance(value, str) else ""


def channel_of(body: dict[str, Any]) -> str:
    """The channel a click or submission came from ("" if none)."""
    return str(
        (body.get("channel") or {}).get("id")
        or (body.get("container") or {}).get("channel_id")
        or ""
    )


def command_actor(command: dict[str, Any]) -> Actor:
    """The person who typed a slash command, with their workspace."""
    return Actor(
        user_id=command.get("user_id", ""),
        team_id=command.get("team_id", ""),
        name=command.get("user_name", ""),
        enterprise_id=command.get("enterprise_id") or "",
    )
