"""What a gateway process serves: its upstream server, its client, its policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from agent_runtime import Actor
from bot.mcp.policy import GatePolicy
from bot.mcp.session_run import SessionKey


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
    poll_interval: timedelta = timedelta(seconds=0.25)
