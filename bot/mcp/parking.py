"""The gateway workflow as every process registers it: a run that only its gateway advances."""

from __future__ import annotations

from typing import Any

from agent_runtime import RunContext, Wait, Workflows
from agent_runtime.context import Suspend

WORKFLOW = "mcp.gateway"
DETACHED = "mcp.gateway.detached"
"""The event a parked gateway run waits for: none is ever delivered; its gateway adopts it."""


def park(ctx: RunContext, data: Any) -> None:
    """Park the run, journaling nothing: a worker that claims it (its gateway died and the
    lease expired) hands it back to the next gateway for the same client."""
    raise Suspend(Wait(wake_at=None, key=DETACHED))


def register(workflows: Workflows) -> None:
    """Register the gateway workflow in ``workflows``."""
    workflows.add(WORKFLOW, park)
