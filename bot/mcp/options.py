"""What a gateway process serves: its upstream server, its client, its policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from bot.mcp.policy import GatePolicy

if TYPE_CHECKING:
    from agent_runtime import Actor
    from bot.mcp.session_run import SessionKey

MAX_CONVERSATIONS = 100
"""Conversations one gateway process may hold by default: each is a run (and a Slack
thread), so a client naming a new id on every call cannot flood the database or the
channel."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Upstream:
    """Where the real MCP server is: a command to start (stdio) or a Streamable HTTP URL."""

    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ValueError("name the upstream server by a command or by a URL, not both")


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayOptions:
    """What one gateway process serves, for whom, under which policy."""

    key: SessionKey
    upstream: Upstream
    requester: Actor
    policy: GatePolicy = field(default_factory=GatePolicy)
    channel: str | None = None
    """The Slack channel of the run's thread and approval cards (None: no Slack)."""
    max_conversations: int = MAX_CONVERSATIONS
    """Conversations (runs) this gateway may hold at once."""
    poll_interval: timedelta = timedelta(seconds=0.25)
