"""``signoff grants list|revoke``: the operator sees the grants in force and revokes them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from agent_runtime import ApprovalPolicy, Approvals, SystemClock, new_run_id, tool
from agent_runtime.approvals import Actor, Approval, ApprovalStatus
from agent_runtime.grant_service import Grants
from agent_runtime.grants import GrantScope
from agent_runtime.tool_lookup import ToolLookup
from store import SqlStore
from store.approval_store import SqlApprovalStore
from tests.integration import cli_ok, run_cli, signoff_env

POLICY = ApprovalPolicy(approvers=("U_DANA",))


@tool(side_effect=True, approval=POLICY)
def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return "ok"


def _ask(approvals: Approvals, run_id: str, position: int) -> Approval:
    return approvals.request(
        run_id=run_id,
        position=position,
        tool=issue_refund,
        args={"order_id": str(position), "amount_cents": 100},
        policy=POLICY.snapshot({}),
        requester=Actor(user_id="U_REQ"),
        now=datetime.now(UTC),
    )


def test_grants_list_and_revoke_from_the_command_line(
    sqlite_store: SqlStore, sqlite_url: str
) -> None:
    """The grant is listed in force; revoked from the CLI, it is listed no more, it decides
    nothing more, and the audit log (with the revocation) verifies."""
    lookup = ToolLookup()
    lookup.add(issue_refund)
    approvals = Approvals(SqlApprovalStore(sqlite_store.engine), SystemClock(), lookup)
    grants = Grants(approvals, SystemClock())
    run_id = sqlite_store.create_run(new_run_id(), "wf", None, datetime.now(UTC)).id
    asked = _ask(approvals, run_id, 1)
    made = grants.approve_and_grant(
        asked.id, Actor(user_id="U_DANA", name="dana"), GrantScope.RUN, seen_hash=asked.args_hash
    ).grant
    assert made is not None
    env = signoff_env(sqlite_url)
    (listed,) = json.loads(cli_ok(env, "grants", "list", "--json"))
    assert (listed["id"], listed["scope"], listed["granted_by"]["name"]) == (made.id, "run", "dana")
    assert "when args.amount_cents <= 100" in cli_ok(env, "grants", "list")
    revoked = json.loads(cli_ok(env, "grants", "revoke", made.id, "--json"))
    assert revoked["revoked_by"]["user_id"].startswith("cli:")
    assert json.loads(cli_ok(env, "grants", "list", "--json")) == []
    assert len(json.loads(cli_ok(env, "grants", "list", "--all", "--json"))) == 1
    assert _ask(approvals, run_id, 2).status == ApprovalStatus.PENDING
    assert json.loads(cli_ok(env, "audit", "verify", "--json"))["ok"] is True
    assert run_cli(env, "grants", "revoke", "0" * 16).returncode == 2
