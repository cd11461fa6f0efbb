"""The tools approvals are asked for, by name, and the fingerprint each approval records:
a digest of the tool's schema and policy, so a decision on an approval asked under another
version of them is refused as stale."""

from __future__ import annotations

from collections.abc import Mapping

from agent_runtime.approvals import args_hash
from agent_runtime.tools import Tool


def fingerprint(tool: Tool, groups: Mapping[str, tuple[str, ...]]) -> str:
    """Return a digest of what an approval is asked under: the tool's schema and its policy."""
    policy = None if tool.approval is None else tool.approval.snapshot(groups).to_json()
    return args_hash({"tool": tool.name, "parameters": tool.parameters, "policy": policy})


class ToolLookup:
    """The current tools by name, each with the approver groups of the agent that has it."""

    def __init__(self) -> None:
        self._tools: dict[str, tuple[Tool, Mapping[str, tuple[str, ...]]]] = {}
        self._fingerprints: dict[str, tuple[Tool, str]] = {}

    def add(self, tool: Tool, groups: Mapping[str, tuple[str, ...]] | None = None) -> None:
        """Make ``tool`` known, its policy's groups resolved with ``groups``."""
        self._tools[tool.name] = (tool, dict(groups or {}))
        self._fingerprints.pop(tool.name, None)

    def get(self, name: str) -> Tool | None:
        """Return the tool called ``name``, if known."""
        found = self._tools.get(name)
        return None if found is None else found[0]

    def groups(self, name: str) -> Mapping[str, tuple[str, ...]]:
        """Return the approver groups the tool called ``name`` was added with."""
        found = self._tools.get(name)
        return {} if found is None else found[1]

    def fingerprint(self, tool: Tool, groups: Mapping[str, tuple[str, ...]] | None = None) -> str:
        """Return the tool's fingerprint under ``groups`` (default: the ones it was added with,
        computed once for the tool added: every decision checks it)."""
        if groups is not None:
            return fingerprint(tool, groups)
        known = self._fingerprints.get(tool.name)
        if known is not None and known[0] is tool:
            return known[1]
        added = self._tools.get(tool.name)
        digest = fingerprint(tool, {} if added is None else added[1])
        if added is not None and added[0] is tool:
            self._fingerprints[tool.name] = (tool, digest)
        return digest
