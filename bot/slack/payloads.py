"""Reading what a Slack interaction carries: the clicked value, the person, a modal's input."""

from __future__ import annotations

from typing import Any

from agent_runtime import Actor


def click(body: dict[str, Any]) -> tuple[str, Actor]:
    """Return the clicked button's value and who clicked."""
    return str(body["actions"][0]["value"]), actor_of(body["user"])


def actor_of(user: dict[str, Any]) -> Actor:
    """Return the person a payload's ``user`` names."""
    return Actor(
        user_id=user["id"],
        team_id=user.get("team_id", ""),
        name=user.get("username") or user.get("name") or "",
    )


def input_value(view: dict[str, Any], block: str) -> str:
    """Return the text a modal's input block ``block`` holds ("" if none)."""
    field = (((view.get("state") or {}).get("values") or {}).get(block) or {}).get("value")
    value = field.get("value") if isinstance(field, dict) else None
    return value if isinstance(value, str) else ""
