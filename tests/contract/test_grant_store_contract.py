"""The grant part of the ApprovalStore contract: in-memory, SQLite and PostgreSQL agree."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from agent_runtime import RunId, Store, new_run_id
from agent_runtime.approvals import Actor
from agent_runtime.audit import AuditDraft
from agent_runtime.audit_report import examine
from agent_runtime.exceptions import GrantNotFound
from agent_runtime.grants import Grant, GrantScope, similar
from agent_runtime.store import ApprovalStore, Granting
from tests.contract.approvals import DANA, T0, approved, stores
from tests.contract.approvals import an_approval as approval_row
from tests.contract.approvals import draft as approval_draft

__all__ = ["stores"]  # the fixture, for pytest


def _grant(run_id: RunId, n: int, tool: str = "issue_refund") -> Grant:
    return Grant(
        id=f"{n:016x}",
        tool=tool,
        scope=GrantScope.RUN,
        run_id=run_id,
        source_approval=f"{n:024x}",
        when=similar({"amount_cents": 4999, "notify": True}),
        granted_by=DANA,
        granted_at=T0 + timedelta(minutes=n),
        expires_at=T0 + timedelta(hours=24, minutes=n),
    )


def _draft(grant: Grant, action: str) -> AuditDraft:
    return AuditDraft(
        at=T0,
        approval_id=grant.source_approval,
        run_id=grant.run_id,
        action=action,
        actor=DANA.to_json(),
        detail={"grant": grant.id},
    )


def test_grants_round_trip_list_and_revoke_once(stores: tuple[Store, ApprovalStore]) -> None:
    """A grant reads back equal and is created once; lists filter by tool and by being in
    force; a revocation is stored once; every change is a verified audit entry."""
    runs, approvals = stores
    run_id = runs.create_run(new_run_id(), "wf", None, T0).id
    first, second = _grant(run_id, 1), _grant(run_id, 2, "send_email")
    assert approvals.create_grant(first, _draft(first, "grant.created"), []) == first
    again = dataclasses.replace(first, granted_by=Actor(user_id="U_EVE"))
    assert approvals.create_grant(again, _draft(again, "grant.created"), []) == first
    approvals.create_grant(second, _draft(second, "grant.created"), [])
    assert approvals.get_grant(first.id) == first
    with pytest.raises(GrantNotFound):
        approvals.get_grant("0" * 16)
    assert approvals.list_grants() == [second, first]
    assert approvals.list_grants(tool="issue_refund") == [first]
    assert approvals.list_grants(active_at=T0 + timedelta(hours=24, minutes=1, seconds=30)) == [
        second
    ]
    revoked = dataclasses.replace(first, revoked_by=DANA, revoked_at=T0 + timedelta(hours=1))
    assert approvals.revoke_grant(revoked, _draft(first, "grant.revoked"), []) == revoked
    assert approvals.revoke_grant(revoked, _draft(first, "grant.revoked"), []) is None
    assert approvals.get_grant(first.id) == revoked
    assert approvals.list_grants(active_at=T0 + timedelta(hours=2)) == [second]
    entries, heads = approvals.audit_log()
    assert [e.action for e in entries] == ["grant.created", "grant.created", "grant.revoked"]
    assert examine(entries, heads).problems == []


def test_grants_list_by_grantor_in_their_workspace(stores: tuple[Store, ApprovalStore]) -> None:
    """Only the grants the person gave, in their own workspace, are theirs."""
    runs, approvals = stores
    run_id = runs.create_run(new_run_id(), "wf", None, T0).id
    mine, elsewhere, grid, theirs = (_grant(run_id, n) for n in (1, 2, 3, 4))
    elsewhere = dataclasses.replace(elsewhere, granted_by=dataclasses.replace(DANA, team_id="T2"))
    grid = dataclasses.replace(grid, granted_by=dataclasses.replace(DANA, enterprise_id="E1"))
    theirs = dataclasses.replace(theirs, granted_by=Actor(user_id="U_OMAR", team_id="T1"))
    for grant in (mine, elsewhere, grid, theirs):
        approvals.create_grant(grant, _draft(grant, "grant.created"), [])
    assert approvals.list_grants(granted_by=DANA) == [mine]
    assert approvals.list_grants(granted_by=grid.granted_by) == [grid]
    assert approvals.list_grants(granted_by=Actor(user_id="U_DANA")) == []
    assert approvals.list_grants(granted_by=theirs.granted_by, active_at=T0) == [theirs]


def test_a_decision_stores_its_grant_in_the_same_transaction(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """With a grant, a winning decision stores it after its own audit entry; a losing one
    (stale version) stores neither."""
    runs, approvals = stores
    run_id = runs.create_run(new_run_id(), "wf", None, T0).id
    pending = approval_row(run_id)
    approvals.create_approval(pending, approval_draft(pending, "requested"))
    grant = dataclasses.replace(_grant(run_id, 1), source_approval=pending.id)
    granting: Granting = (grant, _draft(grant, "grant.created"), [])
    stale = dataclasses.replace(approved(pending), version=pending.version + 1)
    assert not approvals.save_approval(
        stale,
        audit=approval_draft(pending, "approve"),
        decided_before=T0,
        wake=None,
        grant=granting,
    )
    assert approvals.list_grants() == []
    assert approvals.save_approval(
        approved(pending),
        audit=approval_draft(pending, "approve"),
        decided_before=T0,
        wake=None,
        grant=granting,
    )
    assert approvals.get_grant(grant.id) == grant
    entries, heads = approvals.audit_log()
    assert [e.action for e in entries] == ["requested", "approve", "grant.created"]
    assert examine(entries, heads).problems == []
