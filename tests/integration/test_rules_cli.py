"""``signoff rules test`` replays rules over a hand-built history; rule decisions verify."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent_runtime import ApprovalPolicy, Approvals, SystemClock, new_run_id, tool
from agent_runtime.approvals import Actor, Approval, ApprovalStatus, Decision
from agent_runtime.rules import Rules
from agent_runtime.tool_lookup import ToolLookup
from store import SqlStore
from store.approval_store import SqlApprovalStore
from tests.integration import cli_ok, signoff_env

NOW = datetime.now(UTC)
DANA = Actor(user_id="U_DANA", name="dana")
RULES = {
    "rules": [
        {
            "id": "small-refunds",
            "tool": "issue_refund",
            "action": "auto_approve",
            "when": [{"field": "args.amount_cents", "op": "<=", "value": 5000}],
            "limits": {"per_run": 2},
        },
        {
            "id": "no-big-refunds",
            "tool": "issue_refund",
            "action": "deny",
            "reason": "refunds over $1000 go through finance",
            "when": {"any": [{"field": "args.amount_cents", "op": ">", "value": 100000}]},
        },
    ]
}


def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return "ok"


def lookup_customer(email: str) -> str:
    """Find a customer."""
    return "c1"


POLICY = ApprovalPolicy(approvers=("U_DANA",), deadline=timedelta(days=60))
TOOLS = [
    tool(side_effect=True, approval=POLICY)(issue_refund),
    tool(side_effect=True, approval=POLICY)(lookup_customer),
]


def _service(store: SqlStore, rules: Rules | None = None) -> Approvals:
    lookup = ToolLookup()
    for item in TOOLS:
        lookup.add(item)
    return Approvals(SqlApprovalStore(store.engine), SystemClock(), lookup, rules=rules)


def _ask(
    approvals: Approvals,
    run_id: str,
    position: int,
    args: dict[str, Any],
    ago: timedelta,
    name: str = "issue_refund",
) -> Approval:
    (found,) = [t for t in TOOLS if t.name == name]
    return approvals.request(
        run_id=run_id,
        position=position,
        tool=found,
        args=args,
        policy=POLICY.snapshot({}),
        requester=Actor(user_id="U_REQ"),
        now=NOW - ago,
    )


def _decide(approvals: Approvals, asked: Approval, decision: Decision, reason: str) -> None:
    result = approvals.decide(asked.id, DANA, decision, reason=reason)
    assert result.accepted, result.message


def _history(store: SqlStore) -> dict[str, str]:
    """Build the history; return the ids of the approvals a rule would overturn."""
    people = _service(store)
    run_a, run_b, run_c = (store.create_run(new_run_id(), "wf", None, NOW).id for _ in "abc")
    ids: dict[str, str] = {}
    _decide(
        people,
        _ask(people, run_a, 1, {"order_id": "1", "amount_cents": 1000}, timedelta(days=3)),
        Decision.APPROVE,
        "fine",
    )
    rejected = _ask(people, run_a, 2, {"order_id": "2", "amount_cents": 4000}, timedelta(days=2))
    _decide(people, rejected, Decision.REJECT, "duplicate refund")
    ids["rejected"] = rejected.id
    _ask(people, run_a, 3, {"order_id": "3", "amount_cents": 500}, timedelta(days=2))  # limit
    _decide(
        people,
        _ask(people, run_b, 1, {"order_id": "4", "amount_cents": 9000}, timedelta(days=1)),
        Decision.APPROVE,
        "ok",
    )
    approved = _ask(
        people, run_b, 2, {"order_id": "5", "amount_cents": 200000}, timedelta(hours=20)
    )
    _decide(people, approved, Decision.APPROVE, "a big customer")
    ids["approved"] = approved.id
    _decide(
        people,
        _ask(people, run_b, 3, {"order_id": "6", "amount_cents": 300000}, timedelta(hours=10)),
        Decision.REJECT,
        "too much",
    )
    _ask(people, run_b, 4, {"email": "a@example.com"}, timedelta(hours=5), "lookup_customer")
    ruled = _service(store, Rules.parse(RULES))
    by_rule = _ask(ruled, run_c, 1, {"order_id": "7", "amount_cents": 100}, timedelta(hours=1))
    assert by_rule.status == ApprovalStatus.APPROVED
    return ids


def test_rules_test_counts_and_lists_what_rules_would_have_overturned(
    sqlite_store: SqlStore, sqlite_url: str, tmp_path: Path
) -> None:
    """The replay's counts and its list of overturned decisions match the history built."""
    ids = _history(sqlite_store)
    rules_file = tmp_path / "rules.json"
    rules_file.write_text(json.dumps(RULES))
    env = signoff_env(sqlite_url, extra={"SIGNOFF_RULES_FILE": str(rules_file)})
    report = json.loads(cli_ok(env, "rules", "test", "--since", "30", "--json"))
    assert {
        k: report[k]
        for k in ("rules", "approvals", "auto_approved", "auto_denied", "left_to_people")
    } == {"rules": 2, "approvals": 8, "auto_approved": 3, "auto_denied": 2, "left_to_people": 3}
    assert report["approved_but_rejected"] == [
        {
            "approval_id": ids["rejected"],
            "tool": "issue_refund",
            "args": {"order_id": "2", "amount_cents": 4000},
            "rule": "small-refunds",
            "decided_by": "dana",
            "reason": "duplicate refund",
        }
    ]
    assert [o["approval_id"] for o in report["denied_but_approved"]] == [ids["approved"]]
    text = cli_ok(env, "rules", "test")
    assert "would auto-approve, but a person rejected: 1" in text
    assert json.loads(cli_ok(env, "audit", "verify", "--json"))["ok"] is True


def test_rules_test_since_leaves_older_approvals_out(
    sqlite_store: SqlStore, sqlite_url: str, tmp_path: Path
) -> None:
    """--since DAYS replays only approvals requested in that window."""
    _history(sqlite_store)
    people = _service(sqlite_store)
    run_id = sqlite_store.create_run(new_run_id(), "wf", None, NOW).id
    old = _ask(people, run_id, 1, {"order_id": "9", "amount_cents": 100}, timedelta(days=40))
    assert old.requested_at < NOW - timedelta(days=30)
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(json.dumps(RULES))  # JSON is YAML
    env = signoff_env(sqlite_url)
    recent = json.loads(
        cli_ok(env, "rules", "test", "--rules", str(rules_file), "--since", "30", "--json")
    )
    everything = json.loads(cli_ok(env, "rules", "test", "--rules", str(rules_file), "--json"))
    assert (recent["approvals"], everything["approvals"]) == (8, 9)
    assert (recent["auto_approved"], everything["auto_approved"]) == (3, 4)


def test_rules_suggest_prints_narrow_rules_with_their_replay(
    sqlite_store: SqlStore, sqlite_url: str
) -> None:
    """Over the hand-built history, refunds of 9000-200000 (both approved, no rejection in
    between) are suggested with two approvals required, with a replay overturning nothing;
    with the default minimum of three nothing is suggested."""
    _history(sqlite_store)
    env = signoff_env(sqlite_url)
    report = json.loads(cli_ok(env, "rules", "suggest", "--min-approvals", "2", "--json"))
    (found,) = report["suggestions"]
    assert found["covers"] == 2
    assert found["rule"]["mode"] == "shadow"
    assert found["rule"]["when"]["all"] == [
        {"field": "args.amount_cents", "op": ">=", "value": 9000},
        {"field": "args.amount_cents", "op": "<=", "value": 200000},
    ]
    replayed = found["replay"]
    assert (replayed["approvals"], replayed["auto_approved"]) == (8, 2)
    assert replayed["approved_but_rejected"] == []
    assert "no narrow rule is supported" in cli_ok(env, "rules", "suggest")
    text = cli_ok(env, "rules", "suggest", "--min-approvals", "2")
    assert "none is enabled" in text
    assert "would auto-approve, but a person rejected: 0" in text
