"""Upstream MCP tools as approvals know them, in every process that decides approvals.

A process deciding an approval (``signoff approve``, the Slack app) cannot see a
gateway's upstream server, so an upstream tool is known there by its qualified name
only: ``mcp:<gateway>:<tool>``, taking any JSON object as arguments. Whether the tool
changed since a call was approved is checked by the gateway itself before it calls it.
"""

from __future__ import annotations

from typing import Any, NoReturn

from agent_runtime import Tool, ToolLookup

PREFIX = "mcp:"


def qualified_name(gateway: str, tool: str) -> str:
    """Return the name approvals record for ``tool`` behind the gateway ``gateway``."""
    return f"{PREFIX}{gateway}:{tool}"


def upstream_tool(name: str) -> Tool:
    """Return the stand-in approvals use for the upstream tool with qualified ``name``."""
    return Tool(
        name=name,
        description="a tool behind a Signoff MCP gateway",
        fn=_elsewhere,
        parameters={"type": "object"},
        side_effect=True,
    )


class GatewayTools(ToolLookup):
    """A tool lookup that also knows every gateway's upstream tools by qualified name."""

    def get(self, name: str) -> Tool | None:
        """Return the tool called ``name``: a native one, or an upstream tool's stand-in."""
        found = super().get(name)
        if found is None and name.startswith(PREFIX):
            return upstream_tool(name)
        return found


def _elsewhere(**_: Any) -> NoReturn:
    raise RuntimeError("an upstream MCP tool runs only through its gateway")
