"""What the Slack listeners use: the services of one process."""

from __future__ import annotations

from dataclasses import dataclass

from agent_runtime import Agents, Approvals, Clock, Runtime
from agent_runtime.agent_loop import ModelResolver
from agent_runtime.grant_service import Grants
from agent_runtime.notices import Outbox
from bot.slack.home_listener import HomeTabs
from bot.slack.middleware import ReplayGuard


@dataclass(frozen=True, slots=True)
class SlackDeps:
    """What the listeners use."""

    runtime: Runtime
    approvals: Approvals
    grants: Grants
    agents: Agents
    outbox: Outbox
    clock: Clock
    replays: ReplayGuard
    home_tabs: HomeTabs
    models: ModelResolver | None = None
    """Resolves the model a run names, to rebuild what that model saw ("Why?")."""
