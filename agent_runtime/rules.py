"""Approval rules: per tool, decide automatically (approve or deny) or leave it to people.

A rule is data, never code: a predicate is a tree of ``all``/``any`` over conditions
``{field, op, value}``, evaluated without ``eval``. Fields are ``args.<name>`` (dotted for
nested values), ``requester`` (the requester's user id), ``channel`` (the channel the run was
started from; a condition on it is false when the run was not started from a channel) and
``tool``; a ``value`` of ``"group:<name>"`` under ``in``/``not_in`` means the members of that
approver group (``requester in group:finance``).
"""

from __future__ import annotations

import enum
import hashlib
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from agent_runtime.approvals import Approval, ApprovalStatus
from agent_runtime.exceptions import InvalidConfiguration
from agent_runtime.serialization import canonical_json

RULE_ACTOR_PREFIX = "rule:"
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


class RuleAction(enum.StrEnum):
    """What a matching rule does with an approval."""

    AUTO_APPROVE = "auto_approve"
    REQUIRE = "require"
    DENY = "deny"


class RuleMode(enum.StrEnum):
    """Whether a rule decides, or only records what it would have decided."""

    ENFORCE = "enforce"
    SHADOW = "shadow"


class Op(enum.StrEnum):
    """A comparison a condition makes."""

    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="
    IN = "in"
    NOT_IN = "not_in"


_COMPARE: dict[Op, Callable[[Any, Any], bool]] = {
    Op.LT: operator.lt,
    Op.LE: operator.le,
    Op.GT: operator.gt,
    Op.GE: operator.ge,
    Op.EQ: operator.eq,
    Op.NE: operator.ne,
}
_MISSING = object()
E = TypeVar("E", bound=enum.StrEnum)


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleContext:
    """What a predicate may look at besides the arguments."""

    requester: str
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    channel: str = ""
    """The channel the run was started from ("" when it was not started from one)."""


@dataclass(frozen=True, slots=True)
class Condition:
    """One comparison of a field with a value; false when the field is absent or mistyped."""

    field: str
    op: Op
    value: Any

    def holds(self, tool: str, args: Mapping[str, Any], context: RuleContext) -> bool:
        """Tell whether the condition holds for this call."""
        found = _lookup(self.field, tool, args, context)
        if found is _MISSING:
            return False
        if self.op in (Op.IN, Op.NOT_IN):
            inside = any(_equal(found, member) for member in _members(self.value, context))
            return inside if self.op == Op.IN else not inside
        if _kind(found) is not _kind(self.value):  # JSON's kinds: true is not 1
            return self.op == Op.NE
        try:
            return bool(_COMPARE[self.op](found, self.value))
        except TypeError:
            return False

    def to_json(self) -> dict[str, Any]:
        """Return the canonical form."""
        return {"field": self.field, "op": self.op.value, "value": self.value}


@dataclass(frozen=True, slots=True)
class AllOf:
    """True when every part holds (an empty ``all`` always holds)."""

    parts: tuple[Predicate, ...]

    def holds(self, tool: str, args: Mapping[str, Any], context: RuleContext) -> bool:
        """Tell whether every part holds."""
        return all(part.holds(tool, args, context) for part in self.parts)

    def to_json(self) -> dict[str, Any]:
        """Return the canonical form."""
        return {"all": [part.to_json() for part in self.parts]}


@dataclass(frozen=True, slots=True)
class AnyOf:
    """True when at least one part holds."""

    parts: tuple[Predicate, ...]

    def holds(self, tool: str, args: Mapping[str, Any], context: RuleContext) -> bool:
        """Tell whether some part holds."""
        return any(part.holds(tool, args, context) for part in self.parts)

    def to_json(self) -> dict[str, Any]:
        """Return the canonical form."""
        return {"any": [part.to_json() for part in self.parts]}


Predicate = Condition | AllOf | AnyOf


@dataclass(frozen=True, slots=True, kw_only=True)
class DailyTotal:
    """At most ``max`` as the sum of argument ``field`` over a rule's approvals in 24 hours."""

    field: str
    max: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How many automatic approvals a rule may give: per run, per hour, per day's total."""

    per_run: int | None = None
    per_hour: int | None = None
    daily_total: DailyTotal | None = None

    def allow(
        self, used: Sequence[Approval], run_id: str, args: Mapping[str, Any], now: datetime
    ) -> bool:
        """Tell whether one more approval of ``args`` stays within the limits, ``used`` being
        the rule's earlier approvals (those of the run and of the last day at least)."""
        if self.per_run is not None and sum(a.run_id == run_id for a in used) >= self.per_run:
            return False
        recent = [a for a in used if a.decided_at is not None and a.decided_at > now - HOUR]
        if self.per_hour is not None and len(recent) >= self.per_hour:
            return False
        if self.daily_total is None:
            return True
        name = self.daily_total.field
        today = [a for a in used if a.decided_at is not None and a.decided_at > now - DAY]
        total = sum(_number(a.proposed_args, name) for a in today) + _number(args, name)
        return total <= self.daily_total.max

    def to_json(self) -> dict[str, Any]:
        """Return the canonical form (unset limits left out)."""
        out: dict[str, Any] = {}
        if self.per_run is not None:
            out["per_run"] = self.per_run
        if self.per_hour is not None:
            out["per_hour"] = self.per_hour
        if self.daily_total is not None:
            out["daily_total"] = {"field": self.daily_total.field, "max": self.daily_total.max}
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """For calls of ``tool`` matching ``when``: approve, deny, or require a person."""

    id: str
    tool: str
    action: RuleAction
    when: Predicate = AllOf(())
    reason: str = ""
    mode: RuleMode = RuleMode.ENFORCE
    limits: Limits = Limits()

    @property
    def actor_id(self) -> str:
        """The user id its decisions are recorded under: ``rule:<id>``."""
        return RULE_ACTOR_PREFIX + self.id

    @property
    def version(self) -> str:
        """The SHA-256 of the canonical form: which wording of the rule decided."""
        return hashlib.sha256(canonical_json(self.to_json()).encode()).hexdigest()

    def matches(self, tool: str, args: Mapping[str, Any], context: RuleContext) -> bool:
        """Tell whether the rule applies to this call."""
        return tool == self.tool and self.when.holds(tool, args, context)

    def to_json(self) -> dict[str, Any]:
        """Return the canonical form."""
        return {
            "id": self.id,
            "tool": self.tool,
            "action": self.action.value,
            "mode": self.mode.value,
            "reason": self.reason,
            "when": self.when.to_json(),
            "limits": self.limits.to_json(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What the rules make of one call: the deciding rule (if any) and shadow matches."""

    rule: Rule | None
    shadows: tuple[Rule, ...] = ()

    @property
    def action(self) -> RuleAction:
        """The enforced action; ``require`` when no enforcing rule matched."""
        return RuleAction.REQUIRE if self.rule is None else self.rule.action


@dataclass(frozen=True, slots=True)
class Rules:
    """An ordered list of rules: for each call, the first matching enforcing rule decides."""

    rules: tuple[Rule, ...] = ()

    def for_tool(self, tool: str) -> tuple[Rule, ...]:
        """Return the rules about ``tool``, in order."""
        return tuple(rule for rule in self.rules if rule.tool == tool)

    def verdict(self, tool: str, args: Mapping[str, Any], context: RuleContext) -> Verdict:
        """Return the first matching enforcing rule and every matching shadow rule."""
        matching = [r for r in self.for_tool(tool) if r.matches(tool, args, context)]
        enforced = [r for r in matching if r.mode == RuleMode.ENFORCE]
        return Verdict(
            rule=enforced[0] if enforced else None,
            shadows=tuple(r for r in matching if r.mode == RuleMode.SHADOW),
        )

    @classmethod
    def parse(cls, data: Any, source: str = "rules") -> Rules:
        """Read rules from their JSON/YAML form, raising InvalidConfiguration naming the fault."""
        items = data.get("rules") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise InvalidConfiguration(f"{source}: expected a list of rules under 'rules'")
        rules = tuple(_rule(item, f"{source}: rule {n + 1}") for n, item in enumerate(items))
        seen: set[str] = set()
        for rule in rules:
            if rule.id in seen:
                raise InvalidConfiguration(f"{source}: rule id {rule.id!r} is used twice")
            seen.add(rule.id)
        return cls(rules)


def rule_approvals(used: Sequence[Approval], rule: Rule) -> list[Approval]:
    """Return the approvals in ``used`` that ``rule`` approved."""
    return [
        a
        for a in used
        if a.status == ApprovalStatus.APPROVED
        and a.decided_by is not None
        and a.decided_by.user_id == rule.actor_id
    ]


def _rule(item: Any, where: str) -> Rule:
    if not isinstance(item, dict):
        raise InvalidConfiguration(f"{where}: expected a mapping")
    unknown = set(item) - {"id", "tool", "action", "mode", "reason", "when", "limits"}
    if unknown:
        raise InvalidConfiguration(f"{where}: unknown keys {sorted(unknown)}")
    rule_id, tool = item.get("id"), item.get("tool")
    if not isinstance(rule_id, str) or not rule_id.strip():
        raise InvalidConfiguration(f"{where}: 'id' must be a non-empty string")
    where = f"{where} ({rule_id})"
    if not isinstance(tool, str) or not tool:
        raise InvalidConfiguration(f"{where}: 'tool' must be a non-empty string")
    return Rule(
        id=rule_id,
        tool=tool,
        action=_enum(RuleAction, item.get("action"), where, "action"),
        mode=_enum(RuleMode, item.get("mode", "enforce"), where, "mode"),
        reason=str(item.get("reason", "")),
        when=_predicate(item.get("when", {"all": []}), where),
        limits=_limits(item.get("limits", {}), where),
    )


def parse_predicate(data: Any, where: str = "predicate") -> Predicate:
    """Read a predicate from its JSON form, raising InvalidConfiguration naming the fault."""
    return _predicate(data, where)


def _predicate(data: Any, where: str) -> Predicate:
    if isinstance(data, list):
        return AllOf(tuple(_predicate(part, where) for part in data))
    if not isinstance(data, dict):
        raise InvalidConfiguration(f"{where}: a condition must be a mapping or a list")
    if set(data) == {"all"} or set(data) == {"any"}:
        ((key, parts),) = data.items()
        if not isinstance(parts, list):
            raise InvalidConfiguration(f"{where}: '{key}' needs a list")
        built = tuple(_predicate(part, where) for part in parts)
        return AllOf(built) if key == "all" else AnyOf(built)
    if set(data) != {"field", "op", "value"}:
        raise InvalidConfiguration(
            f"{where}: a condition is {{field, op, value}} or {{all: [...]}} / {{any: [...]}}"
        )
    op = _enum(Op, data["op"], where, "op")
    if not isinstance(data["field"], str) or not data["field"]:
        raise InvalidConfiguration(f"{where}: 'field' must be a non-empty string")
    if op in (Op.IN, Op.NOT_IN) and not (
        isinstance(data["value"], list)
        or (isinstance(data["value"], str) and data["value"].startswith("group:"))
    ):
        raise InvalidConfiguration(f"{where}: '{op}' needs a list or 'group:<name>'")
    return Condition(data["field"], op, data["value"])


def _limits(data: Any, where: str) -> Limits:
    if not isinstance(data, dict) or set(data) - {"per_run", "per_hour", "daily_total"}:
        raise InvalidConfiguration(f"{where}: 'limits' takes per_run, per_hour, daily_total")
    for key in ("per_run", "per_hour"):
        value = data.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 0
        ):
            raise InvalidConfiguration(f"{where}: '{key}' must be a whole number >= 0")
    total = data.get("daily_total")
    daily = None
    if total is not None:
        if not (
            isinstance(total, dict)
            and isinstance(total.get("field"), str)
            and isinstance(total.get("max"), int | float)
        ):
            raise InvalidConfiguration(f"{where}: 'daily_total' is {{field: <arg>, max: <n>}}")
        daily = DailyTotal(field=total["field"], max=total["max"])
    return Limits(per_run=data.get("per_run"), per_hour=data.get("per_hour"), daily_total=daily)


def _enum(kind: type[E], value: Any, where: str, key: str) -> E:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise InvalidConfiguration(f"{where}: '{key}' is one of {allowed}, not {value!r}") from None


def _lookup(name: str, tool: str, args: Mapping[str, Any], context: RuleContext) -> Any:
    if name == "requester":
        return context.requester
    if name == "tool":
        return tool
    if name == "channel":
        return context.channel or _MISSING
    if not name.startswith("args."):
        return _MISSING
    found: Any = args
    for key in name.removeprefix("args.").split("."):
        if not isinstance(found, Mapping) or key not in found:
            return _MISSING
        found = found[key]
    return found


def _kind(value: Any) -> type:
    """The JSON kind of ``value``: a boolean is not a number, an int and a float are."""
    if isinstance(value, bool):
        return bool
    return float if isinstance(value, int | float) else type(value)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: values of one kind that compare equal (``True`` is not ``1``)."""
    return _kind(a) is _kind(b) and bool(a == b)


def _members(value: Any, context: RuleContext) -> Sequence[Any]:
    if isinstance(value, str):
        return context.groups.get(value.removeprefix("group:"), ())
    return value if isinstance(value, list) else ()


def _number(args: Mapping[str, Any], name: str) -> float:
    value = args.get(name, 0)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def limit_window(now: datetime) -> datetime:
    """Return the start of the widest time window a limit looks at."""
    return now - DAY
