"""Approval rows stored before the policy snapshot was typed load and are judged as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from agent_runtime import new_run_id
from agent_runtime.approvals import (
    Actor,
    Approval,
    ApprovalKind,
    ApprovalStatus,
    Decision,
    Refusal,
    approval_id,
    args_hash,
    judge,
)
from agent_runtime.audit import AuditDraft
from agent_runtime.policy import OnExpiry, PolicySnapshot
from agent_runtime.serialization import canonical_json
from store import SqlStore
from store.approval_store import SqlApprovalStore
from store.models import approvals

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REQUESTER = Actor(user_id="U_REQ")

WRITTEN_BEFORE = {
    "approvers": ["U_DANA", "U_REQ"],
    "groups": [],
    "required": 1,
    "allow_requester": True,
    "deadline_seconds": 3600.0,
    "on_expiry": "escalate",
    "escalate_to": ["U_BOSS"],
    "remind_every_seconds": 600.0,
}
"""A snapshot as approvals stored it when the policy was a dict."""


def _stored(sql: SqlStore, policy: dict[str, Any]) -> Approval:
    """An approval stored, then its row's policy column set to ``policy`` as written."""
    run_id = sql.create_run(new_run_id(), "wf", None, T0).id
    args = {"order_id": "1042"}
    asked = Approval(
        id=approval_id(run_id, 1),
        run_id=run_id,
        position=1,
        kind=ApprovalKind.TOOL_CALL,
        tool="issue_refund",
        args=args,
        args_hash=args_hash(args),
        fingerprint="f" * 64,
        policy=PolicySnapshot(approvers=("U_OTHER",)),
        requester=REQUESTER,
        requested_at=T0,
        deadline=T0 + timedelta(hours=1),
    )
    store = SqlApprovalStore(sql.engine)
    draft = AuditDraft(at=T0, approval_id=asked.id, run_id=run_id, action="requested")
    store.create_approval(asked, draft)
    with sql.engine.begin() as conn:
        conn.execute(update(approvals).where(approvals.c.id == asked.id).values(policy=policy))
    return store.get_approval(asked.id)


@pytest.mark.parametrize("backend", ["sqlite_store", "pg_store"])
def test_a_row_of_the_dict_format_loads_as_the_policy_it_stored(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """A row written when the snapshot was a dict loads as the same policy, its JSON
    unchanged, and a decision on it follows it (here: the requester may approve)."""
    loaded = _stored(request.getfixturevalue(backend), WRITTEN_BEFORE)
    assert loaded.policy == PolicySnapshot(
        approvers=("U_DANA", "U_REQ"),
        allow_requester=True,
        deadline=timedelta(hours=1),
        on_expiry=OnExpiry.ESCALATE,
        escalate_to=("U_BOSS",),
        remind_every=timedelta(minutes=10),
    )
    assert canonical_json(loaded.policy.to_json()) == canonical_json(WRITTEN_BEFORE)
    decided = judge(loaded, REQUESTER, Decision.APPROVE, T0)
    assert isinstance(decided, Approval)
    assert decided.status == ApprovalStatus.APPROVED


@pytest.mark.parametrize("backend", ["sqlite_store", "pg_store"])
def test_a_row_with_an_empty_policy_loads_and_refuses_everyone(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """A row whose policy is ``{}`` (as early revisions' rows may hold) loads with the
    defaults the dict readers applied: nobody is listed, so nobody may decide."""
    loaded = _stored(request.getfixturevalue(backend), {})
    assert loaded.policy == PolicySnapshot()
    assert loaded.eligible == ()
    refused = judge(loaded, Actor(user_id="U_DANA"), Decision.APPROVE, T0)
    assert isinstance(refused, Refusal)
    assert refused.audit == "unauthorized"
