"""Untrusted text on its way to Slack: escaped so it cannot mention, link or format."""

from __future__ import annotations

SECTION_LIMIT = 3000
"""Characters in a section's text."""


def escape(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` so mrkdwn shows the text as written.

    Without this, untrusted text could produce ``<!channel>``, ``<@U123>`` or links.
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def truncate(text: str, limit: int) -> str:
    """Shorten ``text`` to at most ``limit`` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def chunks(text: str, size: int) -> list[str]:
    """Split ``text`` into pieces of at most ``size`` characters (at least one piece)."""
    return [text[i: i + size] for i in range(0, len(text), size)] or [""]


def user(user_id: str) -> str:
    """Mention a Slack user by id (ids are checked to be plain before use)."""
    plain = "".join(c for c in user_id if c.isalnum() or c in "_-")
    return f"<@{plain}>" if plain == user_id and plain else escape(user_id)
