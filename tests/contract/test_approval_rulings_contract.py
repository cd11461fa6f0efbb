"""Rulings (rule and grant decisions) on every approval store: within limits, never past them."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import cast

from agent_runtime import RunStatus, Store
from agent_runtime.approvals import Actor, Approval, ApprovalStatus
from agent_runtime.audit_report import examine
from agent_runtime.notices import Notice
from agent_runtime.records import Event
from agent_runtime.store import ApprovalStore, Ruling
from agent_runtime.testing import InMemoryStore
from store import SqlStore
from store.outbox import SqlOutbox
from tests.contract.approvals import (
    T0,
    an_approval,
    approved,
    draft,
    stores,
    waiting_run,
)

__all__ = ["stores"]  # the fixture, for pytest

RULE = Actor(user_id="rule:small-refunds", name="rule:small-refunds")


def _ruling(
    approval: Approval,
    *,
    limit: int | None = None,
    seen: list[int] | None = None,
) -> Ruling:
    decided = dataclasses.replace(approved(approval), decided_by=RULE)

    def allowed(used: Sequence[Approval]) -> bool:
        if seen is not None:
            seen.append(len(used))
        return limit is None or len(used) < limit

    return Ruling(
        since=T0 - timedelta(days=1),
        shadows=[draft(approval, "rule.shadow")],
        decided=decided,
        decision=draft(approval, "approve"),
        limited=draft(approval, "rule.limited"),
        wake=Event(key="approval:x", data={"status": "approved"}, delivered_at=T0),
        allowed=allowed,
    )


def _queued(runs: Store) -> list[str]:
    outbox = (
        runs.outbox if isinstance(runs, InMemoryStore) else SqlOutbox(cast(SqlStore, runs).engine)
    )
    return [
        q.notice.key
        for q in outbox.claim_due("t", now=T0, until=T0 + timedelta(minutes=1), limit=10)
    ]


def _notices(approval: Approval, *names: str) -> list[Notice]:
    return [
        Notice(key=f"{name}:{approval.id}", run_id=approval.run_id, kind="run.reply", data={})
        for name in names
    ]


def test_a_ruling_within_its_limit_decides_and_wakes_the_run(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """An allowed ruling stores the decided approval, its entries, notices and wake at once."""
    runs, approvals = stores
    run_id = waiting_run(runs)
    approval = an_approval(run_id)
    ruling = dataclasses.replace(_ruling(approval, limit=1), notices=_notices(approval, "decided"))
    stored = approvals.create_ruled_approval(
        approval, draft(approval, "requested"), _notices(approval, "asked"), ruling
    )
    assert _queued(runs) == [f"decided:{approval.id}"]
    assert (stored.status, stored.version) == (ApprovalStatus.APPROVED, 1)
    assert approvals.get_approval(approval.id) == stored
    assert runs.get_run(run_id).status == RunStatus.PENDING
    entries, heads = approvals.audit_log()
    assert [e.action for e in entries] == ["requested", "rule.shadow", "approve"]
    assert examine(entries, heads).problems == []
    again = approvals.create_ruled_approval(
        approval, draft(approval, "requested"), (), _ruling(approval)
    )
    assert again == stored
    assert len(approvals.audit_log()[0]) == 3


def test_a_ruling_past_its_limit_leaves_the_approval_pending(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """A rule's earlier approvals count against it: past the limit, nothing is decided."""
    runs, approvals = stores
    run_id = waiting_run(runs)
    first, second = an_approval(run_id, position=3), an_approval(run_id, position=5)
    seen: list[int] = []
    approvals.create_ruled_approval(
        first, draft(first, "requested"), (), _ruling(first, limit=1, seen=seen)
    )
    stored = approvals.create_ruled_approval(
        second,
        draft(second, "requested"),
        _notices(second, "asked"),
        dataclasses.replace(
            _ruling(second, limit=1, seen=seen), notices=_notices(second, "decided")
        ),
    )
    assert seen == [0, 1]
    assert _queued(runs) == [f"asked:{second.id}"]
    assert stored.status == ApprovalStatus.PENDING
    assert approvals.get_approval(second.id).status == ApprovalStatus.PENDING
    assert [e.action for e in approvals.audit_log()[0]][3:] == [
        "requested",
        "rule.shadow",
        "rule.limited",
    ]


def test_concurrent_rulings_never_exceed_a_limit_of_one(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """Requesters racing for a rule's last allowed approval: exactly one of them gets it."""
    runs, approvals = stores
    asked = [an_approval(waiting_run(runs), position=n) for n in range(6)]
    start = threading.Barrier(len(asked))
    results: list[Approval] = []

    def request(approval: Approval) -> None:
        start.wait(timeout=30)
        results.append(
            approvals.create_ruled_approval(
                approval, draft(approval, "requested"), (), _ruling(approval, limit=1)
            )
        )

    threads = [threading.Thread(target=request, args=(a,)) for a in asked]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == len(asked)
    assert [r.status for r in results].count(ApprovalStatus.APPROVED) == 1
    stored = [approvals.get_approval(a.id).status for a in asked]
    assert stored.count(ApprovalStatus.APPROVED) == 1
    entries, heads = approvals.audit_log()
    assert examine(entries, heads).problems == []
