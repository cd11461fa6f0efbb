"""API clients' tools as approvals know them: ``api:<client>:<tool>``, any JSON arguments.

The tool runs in the client's own process; Signoff only records and decides its
approval, so the stand-in takes any JSON object and is never stale.
"""

from __future__ import annotations

from typing import Any, NoReturn

from agent_runtime import Tool
from bot.mcp.tools import GatewayTools

PREFIX = "api:"
WORKFLOW = "api.client"
"""The workflow of an API client's runs: parked, since only the API adds to them."""


def qualified_name(client: str, tool: str) -> str:
    """Return the name approvals record for the client's ``tool``."""
    return f"{PREFIX}{client}:{tool}"


def client_tool(qualified: str) -> str:
    """Return the tool's name as its client knows it."""
    return qualified.removeprefix(PREFIX).partition(":")[2]


def api_tool(name: str) -> Tool:
    """Return the stand-in approvals use for an API client's tool of qualified ``name``."""
    return Tool(
        name=name,
        description="a tool of an agent using the Signoff API",
        fn=_elsewhere,
        parameters={"type": "object"},
        side_effect=True,
    )


class ApiTools(GatewayTools):
    """A tool lookup that also knows API clients' tools by qualified name."""

    def get(self, name: str) -> Tool | None:
        """Return the tool called ``name``: native, upstream MCP, or an API client's."""
        found = super().get(name)
        if found is None and name.startswith(PREFIX):
            return api_tool(name)
        return found


def _elsewhere(**_: Any) -> NoReturn:
    raise RuntimeError("an API client's tool runs only in the client")
