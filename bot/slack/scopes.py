"""The OAuth scopes Signoff's bot token needs (``manifest.yml`` asks for exactly these)."""

from __future__ import annotations

BOT_SCOPES: tuple[str, ...] = (
    "commands",  # the /agent command
    "chat:write",  # the run's thread, approval cards and their updates
    "im:write",  # approvers' DMs
    "channels:history",  # finding our own post whose delivery was uncertain, in a channel,
    "groups:history",  # a private channel,
    "im:history",  # or a DM, before posting it again
)

__all__ = ["BOT_SCOPES"]
