"""Suggesting narrow rules from past decisions: for a tool, the widest range of one numeric
argument in which people approved every call, and never rejected (or let expire) one.

Suggestions are printed, never enabled: each comes in shadow mode, with its replay over the
same history (``agent_runtime.rule_replay``) so the operator sees what it would have done.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_runtime.approvals import Approval, ApprovalKind, ApprovalStatus
from agent_runtime.rule_decisions import AUTOMATIC_ACTOR_PREFIXES
from agent_runtime.rule_replay import ReplayReport, replay
from agent_runtime.rules import (
    AllOf,
    Condition,
    Op,
    Rule,
    RuleAction,
    RuleContext,
    RuleMode,
    Rules,
)

MIN_SUPPORT = 3
"""The fewest approved calls a suggested range must cover."""
_NOT_ALLOWED_IN_ID = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestion:
    """A suggested rule, how many approved calls it covers, and its replay over the history."""

    rule: Rule
    covers: int
    replayed: ReplayReport

    def to_json(self) -> dict[str, Any]:
        """Return the stable JSON form."""
        return {
            "rule": self.rule.to_json(),
            "covers": self.covers,
            "replay": self.replayed.to_json(),
        }


def suggest(
    history: Iterable[Approval],
    context: Callable[[Approval], RuleContext],
    *,
    min_support: int = MIN_SUPPORT,
) -> list[Suggestion]:
    """Return, per tool and numeric argument, the widest range people only ever approved
    (covering at least ``min_support`` approvals), most approvals covered first."""
    calls = [a for a in history if a.kind == ApprovalKind.TOOL_CALL]
    by_tool: dict[str, list[Approval]] = defaultdict(list)
    for approval in calls:
        if _verdict(approval) is not None:
            by_tool[approval.tool].append(approval)
    found: list[Suggestion] = []
    for tool, decided in sorted(by_tool.items()):
        for name in _numeric_fields(decided):
            window = _clean_window(decided, name)
            if window is not None and window[2] >= min_support:
                rule = _rule(tool, name, window[0], window[1], window[2])
                found.append(
                    Suggestion(
                        rule=rule, covers=window[2], replayed=replay(Rules((rule,)), calls, context)
                    )
                )
    return sorted(found, key=lambda s: (-s.covers, s.rule.id))


def _verdict(approval: Approval) -> bool | None:
    """True if a person approved it, False if it was rejected or expired, else None."""
    if approval.status in (ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED):
        return False
    by = approval.decided_by
    if approval.status != ApprovalStatus.APPROVED or by is None:
        return None
    automatic = by.user_id.startswith(AUTOMATIC_ACTOR_PREFIXES)
    return None if automatic else True


def _number(args: dict[str, Any], name: str) -> float | None:
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _numeric_fields(decided: Sequence[Approval]) -> list[str]:
    """The top-level arguments that are numbers in every approved call."""
    approved = [a for a in decided if _verdict(a)]
    names = set.intersection(*(set(a.args) for a in approved)) if approved else set()
    return sorted(n for n in names if all(_number(a.args, n) is not None for a in approved))


def _clean_window(decided: Sequence[Approval], name: str) -> tuple[float, float, int] | None:
    """The run of consecutive values of ``name`` holding only approvals with the most of them:
    (lowest, highest, approvals), or None if there is none."""
    values: dict[float, list[bool]] = defaultdict(list)
    for approval in decided:
        value = _number(approval.args, name)
        if value is not None:
            values[value].append(bool(_verdict(approval)))
    best: tuple[float, float, int] | None = None
    start: float | None = None
    count = 0
    last = 0.0
    for value in sorted(values):
        if all(values[value]):
            start = value if start is None else start
            count += len(values[value])
            last = value
            if best is None or count > best[2]:
                best = (start, last, count)
        else:
            start, count = None, 0
    return best


def _rule(tool: str, name: str, low: float, high: float, covers: int) -> Rule:
    slug = _NOT_ALLOWED_IN_ID.sub("-", f"{tool}-{name}".lower()).strip("-")
    return Rule(
        id=f"suggested-{slug}",
        tool=tool,
        action=RuleAction.AUTO_APPROVE,
        mode=RuleMode.SHADOW,
        reason=f"people approved all {covers} such calls",
        when=AllOf(
            (
                Condition(f"args.{name}", Op.GE, _plain(low)),
                Condition(f"args.{name}", Op.LE, _plain(high)),
            )
        ),
    )


def _plain(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value
