"""The approval rules language: parsing with clear errors, predicates, limits, versions."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_runtime.approvals import (
    Actor,
    Approval,
    ApprovalKind,
    ApprovalStatus,
    approval_id,
    args_hash,
)
from agent_runtime.exceptions import InvalidConfiguration
from agent_runtime.policy import PolicySnapshot
from agent_runtime.rules import RuleAction, RuleContext, Rules
from bot.app.settings import Settings, SettingsError

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SUPPORT = RuleContext(requester="U_SAM", groups={"support": ("U_SAM",)})
SMALL = {
    "id": "small",
    "tool": "refund",
    "action": "auto_approve",
    "when": {
        "all": [
            {"field": "args.amount_cents", "op": "<=", "value": 5000},
            {"field": "requester", "op": "in", "value": "group:support"},
            {
                "any": [
                    {"field": "args.currency", "op": "==", "value": "EUR"},
                    {"field": "args.currency", "op": "not_in", "value": ["USD", "GBP"]},
                ]
            },
        ]
    },
}


def _rules(*items: dict[str, Any]) -> Rules:
    return Rules.parse({"rules": list(items)})


@pytest.mark.parametrize(
    ("args", "context", "matches"),
    [
        ({"amount_cents": 5000, "currency": "EUR"}, SUPPORT, True),
        ({"amount_cents": 5001, "currency": "EUR"}, SUPPORT, False),
        ({"amount_cents": "100", "currency": "EUR"}, SUPPORT, False),
        ({"currency": "EUR"}, SUPPORT, False),
        ({"amount_cents": 10, "currency": "USD"}, SUPPORT, False),
        ({"amount_cents": 10, "currency": "CHF"}, SUPPORT, True),
        ({"amount_cents": 10, "currency": "EUR"}, RuleContext(requester="U_EVE"), False),
    ],
)
def test_a_rule_matches_only_inside_its_predicate(
    args: dict[str, Any], context: RuleContext, matches: bool
) -> None:
    """Bounds, groups and any/all hold exactly; a missing or mistyped field never matches."""
    verdict = _rules(SMALL).verdict("refund", args, context)
    assert (verdict.rule is not None) == matches
    assert verdict.action == (RuleAction.AUTO_APPROVE if matches else RuleAction.REQUIRE)


@pytest.mark.parametrize(
    ("op", "value", "matches"),
    [("<=", 5000, False), ("==", 1, False), ("in", [1, 2], False), ("!=", 1, True)],
)
def test_a_boolean_is_not_a_number_to_a_condition(op: str, value: Any, matches: bool) -> None:
    """JSON's kinds hold in conditions: ``true`` is neither at most 5000, equal to 1 nor
    among [1, 2] (as Python's ``True == 1`` would have it), and is unequal to 1."""
    rule = {
        "id": "typed",
        "tool": "refund",
        "action": "auto_approve",
        "when": [{"field": "args.amount_cents", "op": op, "value": value}],
    }
    verdict = _rules(rule).verdict("refund", {"amount_cents": True}, SUPPORT)
    assert (verdict.rule is not None) == matches


def test_the_first_matching_enforcing_rule_decides_and_shadows_are_reported() -> None:
    """Rules for other tools are ignored; shadow rules never decide but are reported."""
    rules = _rules(
        {"id": "other", "tool": "email", "action": "deny"},
        {"id": "watch", "tool": "refund", "action": "deny", "mode": "shadow"},
        {"id": "all", "tool": "refund", "action": "require"},
        SMALL,
    )
    verdict = rules.verdict("refund", {"amount_cents": 1, "currency": "EUR"}, SUPPORT)
    assert verdict.rule is not None
    assert verdict.rule.id == "all"
    assert [r.id for r in verdict.shadows] == ["watch"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"rules": "nope"}, "expected a list of rules"),
        ([{"tool": "refund", "action": "deny"}], "'id' must be a non-empty string"),
        ([{"id": "a", "tool": "refund", "action": "allow"}], "'action' is one of auto_approve"),
        (
            [
                {
                    "id": "a",
                    "tool": "refund",
                    "action": "deny",
                    "when": [{"field": "args.x", "op": "=~", "value": 1}],
                }
            ],
            "'op' is one of <",
        ),
        (
            [
                {
                    "id": "a",
                    "tool": "refund",
                    "action": "deny",
                    "when": [{"field": "args.x", "op": "in", "value": "finance"}],
                }
            ],
            "needs a list or 'group:",
        ),
        (
            [{"id": "a", "tool": "refund", "action": "deny", "when": {"field": "args.x"}}],
            "a condition is {field, op, value}",
        ),
        (
            [{"id": "a", "tool": "refund", "action": "auto_approve", "limits": {"per_day": 3}}],
            "'limits' takes per_run",
        ),
        (
            [{"id": "a", "tool": "refund", "action": "auto_approve", "limits": {"per_run": -1}}],
            "'per_run' must be a whole number",
        ),
        (
            [
                {"id": "a", "tool": "r", "action": "deny"},
                {"id": "a", "tool": "r", "action": "deny"},
            ],
            "rule id 'a' is used twice",
        ),
        ([{"id": "a", "tool": "r", "action": "deny", "exec": "rm -rf /"}], "unknown keys ['exec']"),
    ],
)
def test_a_bad_rules_file_is_refused_naming_the_fault(data: Any, message: str) -> None:
    """Each mistake is an InvalidConfiguration that says which rule and what is wrong."""
    with pytest.raises(InvalidConfiguration, match=re.escape(message)):
        Rules.parse(data, "rules.yaml")


def _given(run_id: str, minutes_ago: int, amount: int) -> Approval:
    args = {"amount_cents": amount}
    return Approval(
        id=approval_id(run_id, minutes_ago),
        run_id=run_id,
        position=1,
        kind=ApprovalKind.TOOL_CALL,
        tool="refund",
        args=args,
        args_hash=args_hash(args),
        fingerprint="f",
        policy=PolicySnapshot(),
        requester=Actor(user_id="U_SAM"),
        requested_at=T0,
        deadline=T0,
        status=ApprovalStatus.APPROVED,
        decided_by=Actor(user_id="rule:small"),
        decided_at=T0 - timedelta(minutes=minutes_ago),
        decided_args=args,
        decided_args_hash=args_hash(args),
    )


def test_limits_count_per_run_per_hour_and_a_daily_total() -> None:
    """Each limit stops the approval that would pass it, and only that one."""
    used = [_given("r1", 30, 100), _given("r2", 120, 200)]
    limits = _rules({**SMALL, "limits": {"per_run": 1}}).rules[0].limits
    assert not limits.allow(used, "r1", {"amount_cents": 1}, T0)
    assert limits.allow(used, "r3", {"amount_cents": 1}, T0)
    hourly = _rules({**SMALL, "limits": {"per_hour": 1}}).rules[0].limits
    assert not hourly.allow(used, "r3", {"amount_cents": 1}, T0)
    assert hourly.allow(used[1:], "r3", {"amount_cents": 1}, T0)
    daily = (
        _rules({**SMALL, "limits": {"daily_total": {"field": "amount_cents", "max": 400}}})
        .rules[0]
        .limits
    )
    assert daily.allow(used, "r3", {"amount_cents": 100}, T0)
    assert not daily.allow(used, "r3", {"amount_cents": 101}, T0)
    assert daily.allow(used, "r3", {"amount_cents": 101}, T0 + timedelta(days=1))


def test_a_rule_version_changes_with_its_wording_only() -> None:
    """The version hash is of the canonical form: key order does not matter, values do."""
    (one,) = _rules(SMALL).rules
    (same,) = _rules(dict(reversed(list(SMALL.items())))).rules
    (other,) = _rules({**SMALL, "action": "deny"}).rules
    assert one.version == same.version != other.version
    assert len(one.version) == 64


def test_settings_read_the_rules_file_and_report_its_faults(tmp_path: Path) -> None:
    """SIGNOFF_RULES_FILE is read as YAML; a missing file or a bad rule is a SettingsError."""
    path = tmp_path / "rules.yaml"
    path.write_text(
        "rules:\n  - id: small\n    tool: refund\n    action: auto_approve\n"
        "    when:\n      - {field: args.amount_cents, op: '<=', value: 5000}\n"
    )
    settings = Settings.from_env({"SIGNOFF_RULES_FILE": str(path)})
    assert [r.id for r in settings.rules.rules] == ["small"]
    assert Settings.from_env({}).rules == Rules()
    with pytest.raises(SettingsError, match="cannot read"):
        Settings.from_env({"SIGNOFF_RULES_FILE": str(tmp_path / "missing.yaml")})
    path.write_text("rules:\n  - id: small\n    tool: refund\n    action: approve\n")
    with pytest.raises(SettingsError, match=r"rule 1 \(small\): 'action' is one of"):
        Settings.from_env({"SIGNOFF_RULES_FILE": str(path)})
