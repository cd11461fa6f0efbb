"""Decisions are scoped by workspace: a user id means a person only within one workspace
(or one Enterprise Grid organization)."""

from __future__ import annotations

import pytest

from agent_runtime import Actor, ApprovalPolicy, ApprovalStatus, Decision, RunStatus
from agent_runtime.approvals import listed, local_people
from agent_runtime.quorum import QUORUM_ACTOR
from tests.unit.agent_harness import DONE, REFUND, AgentHarness


def _pending_for(requester: Actor) -> tuple[AgentHarness, str]:
    h = AgentHarness([REFUND, DONE])
    run_id = h.env.start("refund order 1042", requester=requester)
    h.work()
    assert h.run(run_id).status == RunStatus.WAITING
    (approval,) = h.pending(run_id)
    return h, approval


def test_the_same_approver_id_in_another_workspace_is_refused_and_audited() -> None:
    """``U_DANA`` of workspace T_B cannot decide a run asked in T_A; ``U_DANA`` of T_A can."""
    h, approval = _pending_for(Actor(user_id="U_REQ", team_id="T_A"))

    refused = h.approvals.decide(approval, Actor(user_id="U_DANA", team_id="T_B"), Decision.APPROVE)

    assert not refused.accepted
    assert h.approvals.get(approval).status == ApprovalStatus.PENDING
    assert h.approval_store.audit_log()[0][-1].action == "unauthorized"
    approver = Actor(user_id="U_DANA", team_id="T_A")
    assert h.approvals.decide(approval, approver, Decision.APPROVE).accepted


@pytest.mark.parametrize(
    ("enterprise", "accepted"), [("E_ONE", True), ("E_TWO", False)], ids=["same org", "other org"]
)
def test_on_grid_the_organization_is_the_workspace(enterprise: str, accepted: bool) -> None:
    """On Enterprise Grid an approver of the same organization may decide from another of its
    workspaces; one of another organization may not."""
    h, approval = _pending_for(Actor(user_id="U_REQ", team_id="T_A", enterprise_id="E_ONE"))
    approver = Actor(user_id="U_DANA", team_id="T_C", enterprise_id=enterprise)

    assert h.approvals.decide(approval, approver, Decision.APPROVE).accepted is accepted


def test_a_scoped_approver_entry_names_that_workspace_only() -> None:
    """``U_DANA@T_A`` names U_DANA of T_A (or of organization T_A) and nobody elsewhere; a bare
    ``U_DANA`` names U_DANA wherever; each workspace's people are the entries meant there."""
    entries = ("U_DANA@T_A", "U_ERIN")
    assert listed(entries, Actor(user_id="U_DANA", team_id="T_A"))
    assert not listed(entries, Actor(user_id="U_DANA", team_id="T_B"))
    assert not listed(entries, Actor(user_id="U_DANA"))
    assert listed(entries, Actor(user_id="U_ERIN", team_id="T_B"))
    assert local_people(entries, Actor(user_id="U_REQ", team_id="T_A")) == ("U_DANA", "U_ERIN")
    assert local_people(entries, Actor(user_id="U_REQ", team_id="T_B")) == ("U_ERIN",)


SHARED = ApprovalPolicy(approvers=("U_DANA@T_A", "U_ERIN@T_B", "U_FRAN"), required=2)
"""One approver list for two workspaces: Dana of T_A, Erin of T_B, Fran of either."""


def test_a_quorum_counts_only_the_approvers_of_the_runs_workspace() -> None:
    """In T_A the quorum of two is Dana and Fran of T_A: Erin (listed for T_B) and Fran of
    T_B are refused and count for nothing; Dana's and Fran's approvals approve."""
    h = AgentHarness([REFUND, DONE], policy=SHARED)
    run_id = h.env.start("refund order 1042", requester=Actor(user_id="U_REQ", team_id="T_A"))
    h.work()
    (approval,) = h.pending(run_id)

    for outsider in (
        Actor(user_id="U_ERIN", team_id="T_A"),
        Actor(user_id="U_FRAN", team_id="T_B"),
    ):
        assert not h.approvals.decide(approval, outsider, Decision.APPROVE).accepted
    h.approvals.decide(approval, Actor(user_id="U_DANA", team_id="T_A"), Decision.APPROVE)
    assert h.approvals.get(approval).status == ApprovalStatus.PENDING
    h.approvals.decide(approval, Actor(user_id="U_FRAN", team_id="T_A"), Decision.APPROVE)
    assert h.approvals.get(approval).status == ApprovalStatus.APPROVED


@pytest.mark.parametrize("team", ["T_C", "T_B"])
def test_a_quorum_the_workspace_cannot_meet_is_refused_when_asked(team: str) -> None:
    """Where fewer approvers may decide than the policy requires (T_C: only Fran; T_B with
    three required) the approval is rejected as it is asked, saying why, and the run goes on
    without the refund rather than waiting for its deadline."""
    policy = SHARED if team == "T_C" else ApprovalPolicy(approvers=SHARED.approvers, required=3)
    h = AgentHarness([REFUND, DONE], policy=policy)
    run_id = h.env.start("refund order 1042", requester=Actor(user_id="U_REQ", team_id=team))
    h.work()

    (approval,) = h.approval_store.list_approvals(run_id=run_id)
    assert approval.status == ApprovalStatus.REJECTED
    assert approval.decided_by == QUORUM_ACTOR
    assert f"needs {policy.required} approvals but only" in (approval.reason or "")
    assert team in (approval.reason or "")
    assert h.run(run_id).status == RunStatus.COMPLETED
    assert h.calls["issue_refund"] == 0
    assert [e.action for e in h.approval_store.audit_log()[0]][-2:] == ["requested", "reject"]
