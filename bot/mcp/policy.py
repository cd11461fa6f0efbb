"""Which upstream tools need a person's sign-off, and under which approval policy.

By default a tool is gated unless its MCP annotations say it only reads
(``readOnlyHint``) or say it is neither destructive nor open-world (both hints false;
the MCP defaults of an unannotated tool are destructive and open-world). A policy file
(JSON, or YAML when its name ends in ``.yaml``/``.yml``) overrides this per tool::

    approvers: [U0AAA, U0BBB]   # default approvers (else SIGNOFF_APPROVERS)
    groups: [ops]               # approver groups (SIGNOFF_APPROVER_GROUPS)
    required: 1                 # approvals needed
    deadline_seconds: 3600      # undecided by then: rejected (fail-closed)
    allow_requester: false      # may the MCP client's identity approve its own calls
    tools:
      delete_note: {gated: true, approvers: [U0CCC], required: 2, deadline_seconds: 600}
      read_note: {gated: false}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from agent_runtime import ApprovalPolicy
from bot.mcp.exceptions import PolicyError

RULE_KEYS = frozenset(
    {"gated", "approvers", "groups", "required", "deadline_seconds", "allow_requester"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRule:
    """What the policy says about one tool (None: not said, the default applies)."""

    gated: bool | None = None
    approvers: tuple[str, ...] | None = None
    groups: tuple[str, ...] | None = None
    required: int | None = None
    deadline: timedelta | None = None
    allow_requester: bool | None = None

    def over(self, base: ToolRule) -> ToolRule:
        """Return ``base`` with what this rule says put over it."""
        said = {k: getattr(self, k) for k in _FIELDS if getattr(self, k) is not None}
        return replace(base, **said)


_FIELDS = ("gated", "approvers", "groups", "required", "deadline", "allow_requester")


@dataclass(frozen=True, slots=True, kw_only=True)
class GatePolicy:
    """The gateway's policy: a default rule and per-tool rules."""

    default: ToolRule = ToolRule()
    tools: Mapping[str, ToolRule] = field(default_factory=dict)

    def gated(self, tool: str, annotations: Mapping[str, Any] | None) -> bool:
        """Tell whether calls of ``tool`` wait for a person."""
        rule = self.tools.get(tool, ToolRule())
        return rule.gated if rule.gated is not None else needs_person(annotations)

    def approval(self, tool: str, approvers: tuple[str, ...]) -> ApprovalPolicy:
        """Return the approval policy of ``tool``; ``approvers`` when the policy names none."""
        return self._approval(self.tools.get(tool, ToolRule()), approvers)

    def _approval(self, own: ToolRule, approvers: tuple[str, ...]) -> ApprovalPolicy:
        rule = own.over(self.default)
        return ApprovalPolicy(
            approvers=approvers
            if rule.approvers is None and not rule.groups
            else rule.approvers or (),
            groups=rule.groups or (),
            required=int(rule.required or 1),
            deadline=rule.deadline or timedelta(hours=24),
            allow_requester=bool(rule.allow_requester),
        )

    def too_few_approve(
        self,
        approvers: tuple[str, ...],
        groups: Mapping[str, tuple[str, ...]],
        requester: str,
    ) -> list[str]:
        """The rules under which fewer people may approve a gated call than it requires
        (``the default`` first, then tools by name, each with what it needs and has):
        ``approvers`` where a rule names none, ``groups`` their members, and ``requester``
        counted only where it may approve its own calls."""
        rules = [("the default", ToolRule())]
        rules += [(f"tool {n!r}", r) for n, r in sorted(self.tools.items()) if r.gated is not False]
        short = []
        for name, rule in rules:
            needs, has = self._quorum(rule, approvers, groups, requester)
            if has < needs:
                short.append(f"{name} (needs {needs}, has {has})")
        return short

    def _quorum(
        self,
        own: ToolRule,
        approvers: tuple[str, ...],
        groups: Mapping[str, tuple[str, ...]],
        requester: str,
    ) -> tuple[int, int]:
        """How many approvals a call under ``own`` needs, and how many people may give one."""
        try:
            policy = self._approval(own, approvers)
        except ValueError:  # no approvers, no groups
            return int(own.over(self.default).required or 1), 0
        people = set(policy.snapshot(groups).approvers)
        if not policy.allow_requester:
            people.discard(requester)
        return policy.required, len(people)


def needs_person(annotations: Mapping[str, Any] | None) -> bool:
    """Tell whether MCP tool annotations call for a person (MCP defaults when unsaid)."""
    hints = annotations or {}
    if hints.get("readOnlyHint") is True:
        return False
    return hints.get("destructiveHint", True) is not False or (
        hints.get("openWorldHint", True) is not False
    )


def load_policy(path: Path | None) -> GatePolicy:
    """Read a policy file (see the module's docstring); no file: the default policy."""
    if path is None:
        return GatePolicy()
    data = _parse(path)
    if not isinstance(data, dict):
        raise PolicyError(str(path), "the policy must be a mapping")
    tools = data.pop("tools", None) or {}
    if not isinstance(tools, dict):
        raise PolicyError(str(path), "'tools' must map tool names to rules")
    default = read_rule(str(path), "the default", data)
    return GatePolicy(
        default=default,
        tools={str(k): read_rule(str(path), f"tool {k!r}", v) for k, v in tools.items()},
    )


def _parse(path: Path) -> Any:
    import yaml  # only a policy file needs it

    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".yaml", ".yml"):
            return yaml.safe_load(text)
        return json.loads(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise PolicyError(str(path), f"cannot read the policy: {exc}") from exc


MAX_DEADLINE = timedelta(days=365)
"""The furthest deadline a rule may set: an approval nobody decides within a year is
abandoned, and every date it leads to stays representable."""


def read_rule(source: str, what: str, data: Any) -> ToolRule:
    if not isinstance(data, dict) or set(data) - RULE_KEYS:
        raise PolicyError(
            source, f"{what}: a rule is a mapping with keys among {', '.join(sorted(RULE_KEYS))}"
        )
    try:
        return ToolRule(
            gated=_optional(data, "gated", bool),
            approvers=_names(data.get("approvers")),
            groups=_names(data.get("groups")),
            required=_positive(data.get("required"), "required"),
            deadline=_deadline(data.get("deadline_seconds")),
            allow_requester=_optional(data, "allow_requester", bool),
        )
    except (TypeError, ValueError) as exc:
        raise PolicyError(source, f"{what}: {exc}") from exc


def _optional(data: dict[str, Any], key: str, kind: type[bool]) -> bool | None:
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{key} must be true or false")
    return value


def _names(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("approvers and groups are lists of names")
    return tuple(value)


def _deadline(value: Any) -> timedelta | None:
    if value is None:
        return None
    if _positive(value, "deadline_seconds") > MAX_DEADLINE.total_seconds():
        raise ValueError(
            f"deadline_seconds must be at most {MAX_DEADLINE.total_seconds():,.0f} (a year)"
        )
    return timedelta(seconds=value)


def _positive(value: Any, key: str) -> Any:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
    ):  # YAML reads 1e12 as text: it names a number so only with a dot, 1.0e12
        raise ValueError(f"{key} must be a positive number, not {value!r}")
    return value
