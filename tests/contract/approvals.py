"""What the approval store contract tests share: each store, a waiting run, an approval."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from agent_runtime import (
    RunId,
    Store,
    Wait,
    new_run_id,
)
from agent_runtime.approvals import (
    Actor,
    Approval,
    ApprovalKind,
    ApprovalStatus,
    approval_id,
    args_hash,
)
from agent_runtime.audit import AUDIT_SHARDS, AuditDraft, verify
from agent_runtime.audit_keys import AuditKey, AuditKeys
from agent_runtime.policy import PolicySnapshot
from agent_runtime.store import ApprovalStore
from agent_runtime.testing import InMemoryApprovalStore, InMemoryStore
from store import SqlStore
from store.approval_store import SqlApprovalStore

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KEYS = AuditKeys((AuditKey("k1", b"s" * 32),))
DANA = Actor(user_id="U_DANA", team_id="T1", name="dana")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest) -> tuple[Store, ApprovalStore]:
    """A run store and the approval store beside it, for each implementation."""
    if request.param == "memory":
        runs = InMemoryStore()
        return runs, InMemoryApprovalStore(runs)
    sql: SqlStore = request.getfixturevalue(
        "sqlite_store" if request.param == "sqlite" else "pg_store"
    )
    return sql, SqlApprovalStore(sql.engine)


def waiting_run(runs: Store, key: str = "approval:x") -> RunId:
    run_id = runs.create_run(new_run_id(), "wf", None, T0).id
    ((_, lease),) = runs.claim_runs("w", limit=1, now=T0, expires_at=T0 + timedelta(seconds=30))
    runs.suspend(lease, Wait(wake_at=None, key=key), T0)
    return run_id


def an_approval(
    run_id: str, position: int = 3, deadline: timedelta = timedelta(hours=1)
) -> Approval:
    args = {"order_id": "1042", "amount_cents": 4999}
    return Approval(
        id=approval_id(run_id, position),
        run_id=run_id,
        position=position,
        kind=ApprovalKind.TOOL_CALL,
        tool="issue_refund",
        args=args,
        args_hash=args_hash(args),
        fingerprint="f" * 64,
        policy=PolicySnapshot(approvers=("U_DANA",)),
        requester=Actor(user_id="U_REQ"),
        requested_at=T0,
        deadline=T0 + deadline,
        remind_at=T0 + timedelta(minutes=10),
    )


def draft(approval: Approval, action: str) -> AuditDraft:
    return AuditDraft(
        at=T0,
        approval_id=approval.id,
        run_id=approval.run_id,
        action=action,
        actor=DANA.to_json(),
        detail={"n": 1},
    )


def approved(approval: Approval) -> Approval:
    return dataclasses.replace(
        approval,
        status=ApprovalStatus.APPROVED,
        decided_by=DANA,
        decided_at=T0,
        decided_args=approval.args,
        decided_args_hash=approval.args_hash,
    )


def pending(runs: SqlStore, approvals: SqlApprovalStore, count: int) -> list[Approval]:
    """``count`` waiting runs, each with a pending approval."""
    found = []
    for _ in range(count):
        approval = an_approval(waiting_run(runs))
        approvals.create_approval(approval, draft(approval, "requested"))
        found.append(approval)
    return found


def chains_sound(approvals: SqlApprovalStore) -> None:
    """Every shard's chain verifies against its head."""
    entries, heads = approvals.audit_log()
    for shard in range(AUDIT_SHARDS):
        mine = [e for e in entries if e.shard == shard]
        assert verify(mine, heads.get(shard), shard) == []
