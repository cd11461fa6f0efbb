"""Grants: an approval given ahead of time decides only calls inside its predicate, scope,
lifetime and grantor's rights, and is recorded in the audit chain."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_runtime import ApprovalPolicy, Approvals, new_run_id, tool
from agent_runtime.approvals import Actor, Approval, ApprovalStatus
from agent_runtime.audit_report import examine
from agent_runtime.clock import FrozenClock
from agent_runtime.exceptions import GrantRefused
from agent_runtime.grant_service import Grants
from agent_runtime.grants import Grant, GrantScope, describe, similar
from agent_runtime.policy import PolicySnapshot
from agent_runtime.rules import Rules
from agent_runtime.testing import InMemoryApprovalStore, InMemoryStore
from agent_runtime.tool_lookup import ToolLookup

DANA, ERIN, REQ = Actor(user_id="U_DANA"), Actor(user_id="U_ERIN"), Actor(user_id="U_REQ")
POLICY = ApprovalPolicy(approvers=("U_DANA", "U_ERIN"))


@tool(side_effect=True, approval=POLICY)
def refund(order_id: str, amount_cents: int, notify: bool) -> str:
    """Refund an order."""
    return "ok"


@tool(side_effect=True, approval=POLICY)
def send_email(to: str) -> str:
    """Send an email."""
    return "sent"


@tool(side_effect=True, approval=ApprovalPolicy(approvers=("U_DANA", "U_ERIN"), required=2))
def wire(amount_cents: int) -> str:
    """Wire money (two approvers)."""
    return "wired"


class World:
    """An approvals service and its grants over in-memory stores, on a frozen clock."""

    def __init__(self, rules: Rules | None = None) -> None:
        self.clock = FrozenClock(datetime(2026, 12, 1, 9, tzinfo=UTC))
        self.runs = InMemoryStore()
        self.store = InMemoryApprovalStore(self.runs)
        lookup = ToolLookup()
        for item in (refund, send_email, wire):
            lookup.add(item)
        self.approvals = Approvals(self.store, self.clock, lookup, rules=rules)
        self.grants = Grants(self.approvals, self.clock, day_granters=("U_ERIN",))
        self.position = 0

    def run(self) -> str:
        return self.runs.create_run(new_run_id(), "wf", None, self.clock.now()).id

    def ask(
        self, run_id: str, args: dict[str, Any], *, name: str = "refund", by: Actor = REQ
    ) -> Approval:
        self.position += 1
        found = {"refund": refund, "send_email": send_email, "wire": wire}[name]
        return self.approvals.request(
            run_id=run_id,
            position=self.position,
            tool=found,
            args=args,
            policy=found.approval.snapshot({}) if found.approval else PolicySnapshot(),
            requester=by,
            now=self.clock.now(),
        )

    def grant(self, asked: Approval, actor: Actor, scope: GrantScope) -> Grant:
        result = self.grants.approve_and_grant(
            asked.id, actor, scope, seen_hash=asked.proposed_hash
        )
        assert result.decision.accepted
        assert result.grant is not None
        return result.grant


def _refund(amount: int, notify: bool = True) -> dict[str, Any]:
    return {"order_id": "1042", "amount_cents": amount, "notify": notify}


def test_a_run_grant_approves_similar_calls_of_its_run_only() -> None:
    """Smaller refunds in the same run are approved as grant:<id>; a larger one, another
    flag, another tool or another run still waits for a person."""
    world = World()
    run_a, run_b = world.run(), world.run()
    grant = world.grant(world.ask(run_a, _refund(4999)), DANA, GrantScope.RUN)
    later = world.ask(run_a, _refund(1200))
    assert later.status == ApprovalStatus.APPROVED
    assert later.decided_by == Actor(user_id=f"grant:{grant.id}", name=f"grant:{grant.id}")
    assert world.ask(run_a, _refund(5000)).status == ApprovalStatus.PENDING
    assert world.ask(run_a, _refund(100, notify=False)).status == ApprovalStatus.PENDING
    assert world.ask(run_a, {"to": "a@example.com"}, name="send_email").status == "pending"
    assert world.ask(run_b, _refund(100)).status == ApprovalStatus.PENDING


def test_grants_are_in_the_audit_chain_with_who_when_scope_and_expiry() -> None:
    """The approval, the grant's terms and each decision by it are chained entries."""
    world = World()
    run_id = world.run()
    grant = world.grant(world.ask(run_id, _refund(4999)), DANA, GrantScope.RUN)
    world.ask(run_id, _refund(10))
    entries, heads = world.store.audit_log()
    assert examine(entries, heads).problems == []
    assert [e.action for e in entries] == [
        "requested",
        "approve",
        "grant.created",
        "requested",
        "approve",
    ]
    created, decided = entries[2], entries[4]
    assert created.actor == DANA.to_json()
    assert created.detail is not None
    assert created.detail["scope"] == "run"
    assert created.detail["expires_at"] == (world.clock.now() + timedelta(hours=24)).isoformat()
    assert created.detail["version"] == grant.version
    assert decided.actor is not None
    assert decided.actor["user_id"] == f"grant:{grant.id}"
    assert decided.detail is not None
    assert decided.detail["grant_version"] == grant.version
    assert decided.detail["granted_by"] == DANA.to_json()


def test_a_grant_stops_when_revoked_or_expired() -> None:
    """After revocation, or 24 hours, the same call waits for a person again."""
    world = World()
    run_id = world.run()
    first = world.grant(world.ask(run_id, _refund(4999)), DANA, GrantScope.RUN)
    assert world.ask(run_id, _refund(10)).status == ApprovalStatus.APPROVED
    revoked = world.grants.revoke(first.id, ERIN)
    assert revoked.revoked_by == ERIN
    assert revoked.revoked_at == world.clock.now()
    assert world.ask(run_id, _refund(10)).status == ApprovalStatus.PENDING
    world.grant(world.ask(run_id, _refund(4999)), DANA, GrantScope.RUN)
    world.clock.advance(timedelta(hours=24))
    assert world.ask(run_id, _refund(10)).status == ApprovalStatus.PENDING
    assert [e.action for e in world.store.audit_log()[0]].count("grant.revoked") == 1


def test_only_grantor_approvers_and_day_granters_may_revoke() -> None:
    """The requester may not revoke a grant; the operator may."""
    world = World()
    run_id = world.run()
    grant = world.grant(world.ask(run_id, _refund(4999)), DANA, GrantScope.RUN)
    with pytest.raises(GrantRefused):
        world.grants.revoke(grant.id, REQ)
    assert world.grants.revoke(grant.id, Actor(user_id="cli:ops"), operator=True).revoked_at


def test_a_day_grant_needs_the_right_and_covers_every_run() -> None:
    """Dana may not grant for 24 h (and her click decides nothing); Erin may, for any run."""
    world = World()
    asked = world.ask(world.run(), _refund(4999))
    with pytest.raises(GrantRefused):
        world.grants.approve_and_grant(asked.id, DANA, GrantScope.DAY, seen_hash=asked.args_hash)
    assert world.approvals.get(asked.id).status == ApprovalStatus.PENDING
    world.grant(asked, ERIN, GrantScope.DAY)
    assert world.ask(world.run(), _refund(4000)).status == ApprovalStatus.APPROVED


def test_a_day_grant_never_approves_a_call_from_another_workspace() -> None:
    """Erin's 24 h grant, made in workspace A, approves A's calls but not those of a run
    from workspace B, even where B has a user with the same id."""
    world = World()
    in_a, in_b = Actor(user_id="U_REQ", team_id="T_A"), Actor(user_id="U_REQ", team_id="T_B")
    erin_a = Actor(user_id="U_ERIN", team_id="T_A")
    world.grant(world.ask(world.run(), _refund(4999), by=in_a), erin_a, GrantScope.DAY)
    assert world.ask(world.run(), _refund(4000), by=in_a).status == ApprovalStatus.APPROVED
    assert world.ask(world.run(), _refund(4000), by=in_b).status == ApprovalStatus.PENDING


def test_a_grant_never_stands_in_for_a_quorum_or_for_its_grantor_as_requester() -> None:
    """No grant from a two-approver call; a grant never decides a call its grantor asked."""
    world = World()
    run_id = world.run()
    asked = world.ask(run_id, {"amount_cents": 10}, name="wire")
    with pytest.raises(GrantRefused):
        world.grants.approve_and_grant(asked.id, DANA, GrantScope.RUN, seen_hash=asked.args_hash)
    assert world.approvals.get(asked.id).status == ApprovalStatus.PENDING
    world.grant(world.ask(run_id, _refund(4999)), DANA, GrantScope.RUN)
    assert world.ask(run_id, _refund(10), by=DANA).status == ApprovalStatus.PENDING


def test_a_refused_approval_makes_no_grant() -> None:
    """A stale card's click (arguments changed since shown) approves nothing, grants nothing."""
    world = World()
    asked = world.ask(world.run(), _refund(4999))
    result = world.grants.approve_and_grant(asked.id, DANA, GrantScope.RUN, seen_hash="0" * 64)
    assert not result.decision.accepted
    assert result.grant is None
    assert world.store.list_grants() == []


def test_an_enforcing_rule_decides_before_any_grant() -> None:
    """A deny rule matching the call rejects it though a grant covers it."""
    rules = Rules.parse(
        [
            {
                "id": "no-refunds-for-1042",
                "tool": "refund",
                "action": "deny",
                "when": [{"field": "args.amount_cents", "op": "==", "value": 13}],
            }
        ]
    )
    world = World(rules)
    run_id = world.run()
    world.grant(world.ask(run_id, _refund(4999)), DANA, GrantScope.RUN)
    denied = world.ask(run_id, _refund(13))
    assert denied.status == ApprovalStatus.REJECTED
    assert denied.decided_by is not None
    assert denied.decided_by.user_id.startswith("rule:")


def test_similar_bounds_numbers_and_flags_and_reads_in_words() -> None:
    """The default predicate: numbers at most the approved ones, flags equal, strings free."""
    predicate = similar({"order_id": "1042", "amount_cents": 4999, "notify": True})
    assert describe(predicate) == "args.amount_cents <= 4999 and args.notify == true"
    assert describe(similar({"to": "x"})) == "any arguments"
