"""The ApprovalStore contract: in-memory, SQLite and PostgreSQL behave the same."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from agent_runtime import (
    ApprovalNotFound,
    ApprovalNotPending,
    RunId,
    RunStatus,
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
from agent_runtime.audit import AUDIT_SHARDS, AuditDraft, shard_of
from agent_runtime.audit_keys import AuditKey, AuditKeys
from agent_runtime.audit_report import examine
from agent_runtime.notices import Notice
from agent_runtime.policy import PolicySnapshot
from agent_runtime.records import Event
from agent_runtime.store import ApprovalStore, Ruling
from agent_runtime.testing import InMemoryApprovalStore, InMemoryStore
from store import SqlStore
from store.approval_store import SqlApprovalStore
from store.outbox import SqlOutbox

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


def _waiting_run(runs: Store, key: str = "approval:x") -> RunId:
    run_id = runs.create_run(new_run_id(), "wf", None, T0).id
    ((_, lease),) = runs.claim_runs("w", limit=1, now=T0, expires_at=T0 + timedelta(seconds=30))
    runs.suspend(lease, Wait(wake_at=None, key=key), T0)
    return run_id


def _approval(run_id: str, position: int = 3, deadline: timedelta = timedelta(hours=1)) -> Approval:
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


def _draft(approval: Approval, action: str) -> AuditDraft:
    return AuditDraft(
        at=T0,
        approval_id=approval.id,
        run_id=approval.run_id,
        action=action,
        actor=DANA.to_json(),
        detail={"n": 1},
    )


def _approved(approval: Approval) -> Approval:
    return dataclasses.replace(
        approval,
        status=ApprovalStatus.APPROVED,
        decided_by=DANA,
        decided_at=T0,
        decided_args=approval.args,
        decided_args_hash=approval.args_hash,
    )


def test_approval_round_trips_and_create_is_idempotent(stores: tuple[Store, ApprovalStore]) -> None:
    """A created approval reads back equal; creating the same id again keeps the first."""
    runs, approvals = stores
    approval = _approval(_waiting_run(runs))
    assert approvals.create_approval(approval, _draft(approval, "requested")) == approval
    again = dataclasses.replace(approval, tool="other")
    assert approvals.create_approval(again, _draft(again, "requested")) == approval
    assert approvals.get_approval(approval.id) == approval
    assert [e.action for e in approvals.audit_log()[0]] == ["requested"]


def test_unknown_approval_is_not_found(stores: tuple[Store, ApprovalStore]) -> None:
    """Reading an unknown approval raises ApprovalNotFound."""
    with pytest.raises(ApprovalNotFound):
        stores[1].get_approval("nope")


def test_save_is_a_compare_and_set_on_version(stores: tuple[Store, ApprovalStore]) -> None:
    """Only a save based on the stored version wins; the loser changes nothing."""
    runs, approvals = stores
    approval = _approval(_waiting_run(runs))
    approvals.create_approval(approval, _draft(approval, "requested"))
    first = _approved(approval)
    second = dataclasses.replace(first, status=ApprovalStatus.REJECTED, reason="no")
    assert approvals.save_approval(
        first, audit=_draft(first, "approve"), decided_before=T0, wake=None
    )
    assert not approvals.save_approval(
        second, audit=_draft(second, "reject"), decided_before=T0, wake=None
    )
    stored = approvals.get_approval(approval.id)
    assert (stored.status, stored.version) == (ApprovalStatus.APPROVED, 1)
    assert [e.action for e in approvals.audit_log()[0]] == ["requested", "approve"]


def test_decision_after_the_deadline_cannot_win(stores: tuple[Store, ApprovalStore]) -> None:
    """The deadline is part of the compare-and-set: a decision at or after it is not saved."""
    runs, approvals = stores
    approval = _approval(_waiting_run(runs), deadline=timedelta(minutes=5))
    approvals.create_approval(approval, _draft(approval, "requested"))
    late = T0 + timedelta(minutes=5)
    assert not approvals.save_approval(
        _approved(approval), audit=_draft(approval, "approve"), decided_before=late, wake=None
    )
    assert approvals.get_approval(approval.id).status == ApprovalStatus.PENDING


def test_final_decision_wakes_the_waiting_run(stores: tuple[Store, ApprovalStore]) -> None:
    """Saving with a wake event delivers it in the same transaction and makes the run due."""
    runs, approvals = stores
    run_id = _waiting_run(runs)
    approval = _approval(run_id)
    approvals.create_approval(approval, _draft(approval, "requested"))
    assert runs.get_run(run_id).status == RunStatus.WAITING
    event = Event(key="approval:x", data={"status": "approved"}, delivered_at=T0)
    assert approvals.save_approval(
        _approved(approval), audit=_draft(approval, "approve"), decided_before=T0, wake=event
    )
    assert runs.get_run(run_id).status == RunStatus.PENDING
    assert runs.get_event(run_id, "approval:x") is not None


def test_consume_allows_one_execution(stores: tuple[Store, ApprovalStore]) -> None:
    """An approval is consumed by one journal position; the same position may repeat."""
    runs, approvals = stores
    approval = _approval(_waiting_run(runs))
    approvals.create_approval(approval, _draft(approval, "requested"))
    assert approvals.consume_approval(approval.id, 8)
    assert approvals.consume_approval(approval.id, 8)
    assert not approvals.consume_approval(approval.id, 12)


def test_due_approvals_by_deadline_or_reminder(stores: tuple[Store, ApprovalStore]) -> None:
    """Pending approvals are due at their reminder time or deadline; decided ones never."""
    runs, approvals = stores
    run_id = _waiting_run(runs)
    first, second = _approval(run_id, 3), _approval(run_id, 7)
    for approval in (first, second):
        approvals.create_approval(approval, _draft(approval, "requested"))
    approvals.save_approval(
        _approved(second), audit=_draft(second, "approve"), decided_before=T0, wake=None
    )
    assert approvals.due_approvals(T0) == []
    assert [a.id for a in approvals.due_approvals(T0 + timedelta(minutes=10))] == [first.id]
    assert [a.status for a in approvals.list_approvals(run_id=run_id)] == [
        ApprovalStatus.APPROVED,
        ApprovalStatus.PENDING,
    ]


def test_due_approvals_come_longest_overdue_first_a_batch_at_a_time(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """The sweep reads at most ``limit`` due approvals, ordered by their next due time."""
    runs, approvals = stores
    run_id = _waiting_run(runs)
    asked = [
        dataclasses.replace(_approval(run_id, position), remind_at=T0 + timedelta(minutes=minute))
        for position, minute in ((3, 30), (5, 10), (7, 20))
    ]
    for approval in asked:
        approvals.create_approval(approval, _draft(approval, "requested"))
    due = approvals.due_approvals(T0 + timedelta(minutes=25), 1)
    assert [a.id for a in due] == [asked[1].id]
    due = approvals.due_approvals(T0 + timedelta(minutes=25), 10)
    assert [a.id for a in due] == [asked[1].id, asked[2].id]


def test_audit_chain_verifies(stores: tuple[Store, ApprovalStore]) -> None:
    """Entries from concurrent appends form one unbroken chain that matches its head."""
    runs, approvals = stores
    approval = _approval(_waiting_run(runs))
    approvals.create_approval(approval, _draft(approval, "requested"))
    threads = [
        threading.Thread(
            target=lambda: [
                approvals.append_audit(_draft(approval, "unauthorized")) for _ in range(5)
            ]
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries, heads = approvals.audit_log()
    assert len(entries) == 21
    assert examine(entries, heads).problems == []


def test_each_runs_entries_go_to_its_shards_chain(stores: tuple[Store, ApprovalStore]) -> None:
    """Concurrent decisions on runs of several shards: each run's entries are numbered in its
    shard's chain, the newest of each chain is what an anchor records, and all verify."""
    runs, approvals = stores
    asked = [_approval(_waiting_run(runs)) for _ in range(8)]
    for approval in asked:
        approvals.create_approval(approval, _draft(approval, "requested"))

    def decide(approval: Approval) -> None:
        assert approvals.save_approval(
            _approved(approval), audit=_draft(approval, "approve"), decided_before=T0, wake=None
        )
        approvals.append_audit(_draft(approval, "late"))

    threads = [threading.Thread(target=decide, args=(a,)) for a in asked]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries, heads = approvals.audit_log()
    assert sorted(heads) == list(range(AUDIT_SHARDS))
    assert all(e.shard == shard_of(e.run_id) for e in entries)
    assert [(e.shard, e.seq) for e in entries] == sorted((e.shard, e.seq) for e in entries)
    for shard in {e.shard for e in entries}:
        chain = [e for e in entries if e.shard == shard]
        assert [e.seq for e in chain] == list(range(1, len(chain) + 1))
        assert heads[shard] == (chain[-1].seq, chain[-1].hash)
    newest = approvals.newest_audit_entries()
    assert [e.shard for e in newest] == sorted({e.shard for e in entries})
    assert examine(entries, heads).problems == []


def _signing(runs: Store, keys: AuditKeys) -> ApprovalStore:
    """The approval store of the same implementation as ``runs``, signing with ``keys``."""
    if isinstance(runs, SqlStore):
        return SqlApprovalStore(runs.engine, keys)
    assert isinstance(runs, InMemoryStore)
    return InMemoryApprovalStore(runs, keys)


def test_a_store_with_keys_signs_every_entry(stores: tuple[Store, ApprovalStore]) -> None:
    """With audit keys every entry carries the first key's id and a MAC that verifies."""
    runs, _ = stores
    approvals = _signing(runs, KEYS)
    assert approvals.newest_audit_entries() == []
    approval = _approval(_waiting_run(runs))
    approvals.create_approval(approval, _draft(approval, "requested"))
    approvals.save_approval(
        _approved(approval), audit=_draft(approval, "approve"), decided_before=T0, wake=None
    )
    approvals.append_audit(_draft(approval, "late"))
    entries, heads = approvals.audit_log()
    assert [(e.kid, e.mac is not None) for e in entries] == [("k1", True)] * 3
    assert approvals.newest_audit_entries() == entries[-1:]
    report = examine(entries, heads, keys=KEYS)
    assert (report.ok, report.unsigned) == (True, 0)
    assert [c.signed_from for c in report.chains if c.entries] == [1]


def _closed(approval: Approval) -> tuple[Approval, AuditDraft, list[Notice]]:
    closed = dataclasses.replace(
        approval, status=ApprovalStatus.REJECTED, decided_by=DANA, decided_at=T0, reason="cancelled"
    )
    return closed, _draft(approval, "closed"), []


def test_cancel_run_closes_its_pending_approvals_with_it(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """Cancelling a run rejects its pending approvals and audits each, leaving others alone."""
    runs, approvals = stores
    run_id, other = _waiting_run(runs), _waiting_run(runs)
    first, second, elsewhere = _approval(run_id, 3), _approval(run_id, 5), _approval(other, 3)
    for approval in (first, second, elsewhere):
        approvals.create_approval(approval, _draft(approval, "requested"))
    assert approvals.cancel_run(run_id, T0, [], _closed).status == RunStatus.CANCELLED
    assert [approvals.get_approval(a.id).status for a in (first, second, elsewhere)] == [
        ApprovalStatus.REJECTED,
        ApprovalStatus.REJECTED,
        ApprovalStatus.PENDING,
    ]
    entries, heads = approvals.audit_log()
    mine = [e.action for e in entries if e.run_id == run_id]
    assert mine == ["requested", "requested", "closed", "closed"]
    assert examine(entries, heads).problems == []


def test_a_failed_cancel_changes_nothing(stores: tuple[Store, ApprovalStore]) -> None:
    """If closing an approval fails, the run is not cancelled either: one transaction."""
    runs, approvals = stores
    run_id = _waiting_run(runs)
    approval = _approval(run_id)
    approvals.create_approval(approval, _draft(approval, "requested"))

    def broken(pending: Approval) -> tuple[Approval, AuditDraft, list[Notice]]:
        raise RuntimeError("closing failed")

    with pytest.raises(RuntimeError):
        approvals.cancel_run(run_id, T0, [], broken)
    assert runs.get_run(run_id).status == RunStatus.WAITING
    assert approvals.get_approval(approval.id).status == ApprovalStatus.PENDING


def test_a_cancel_while_pending_changes_nothing_once_the_approval_is_decided(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """A cancel conditioned on a decided approval raises ApprovalNotPending and changes nothing."""
    runs, approvals = stores
    run_id = _waiting_run(runs)
    approval, other = _approval(run_id, 3), _approval(run_id, 5)
    for each in (approval, other):
        approvals.create_approval(each, _draft(each, "requested"))
    decided = _approved(approval)
    assert approvals.save_approval(
        decided, audit=_draft(decided, "approve"), decided_before=T0, wake=None
    )
    with pytest.raises(ApprovalNotPending):
        approvals.cancel_run(run_id, T0, [], _closed, while_pending=approval.id)
    assert runs.get_run(run_id).status == RunStatus.WAITING
    assert approvals.get_approval(other.id).status == ApprovalStatus.PENDING
    assert [e.action for e in approvals.audit_log()[0]][-1] == "approve"


def test_a_cancel_while_pending_closes_the_pending_approval(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """A cancel conditioned on a still pending approval cancels the run and closes it."""
    runs, approvals = stores
    run_id = _waiting_run(runs)
    approval = _approval(run_id)
    approvals.create_approval(approval, _draft(approval, "requested"))
    ended = approvals.cancel_run(run_id, T0, [], _closed, while_pending=approval.id)
    assert ended.status == RunStatus.CANCELLED
    assert approvals.get_approval(approval.id).status == ApprovalStatus.REJECTED


def _race_decision_and_cancel(runs: Store, approvals: ApprovalStore) -> None:
    """Start a decision and a conditioned cancel on one approval at once; check one won."""
    run_id = _waiting_run(runs)
    approval = _approval(run_id)
    approvals.create_approval(approval, _draft(approval, "requested"))
    start = threading.Barrier(2)
    outcome: dict[str, bool] = {}

    def decide() -> None:
        start.wait(timeout=30)
        decided = _approved(approval)
        outcome["decided"] = approvals.save_approval(
            decided, audit=_draft(decided, "approve"), decided_before=T0, wake=None
        )

    def cancel() -> None:
        start.wait(timeout=30)
        try:
            approvals.cancel_run(run_id, T0, [], _closed, while_pending=approval.id)
            outcome["cancelled"] = True
        except ApprovalNotPending:
            outcome["cancelled"] = False

    threads = [threading.Thread(target=decide), threading.Thread(target=cancel)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcome.values()) == [False, True]
    stored, run = approvals.get_approval(approval.id).status, runs.get_run(run_id).status
    if outcome["decided"]:
        assert (stored, run) == (ApprovalStatus.APPROVED, RunStatus.WAITING)
    else:
        assert (stored, run) == (ApprovalStatus.REJECTED, RunStatus.CANCELLED)


def test_a_decision_racing_a_cancel_while_pending_one_wins(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """A decision and a conditioned cancel racing on one approval: exactly one takes effect,
    and the run and the audit chain agree with it."""
    runs, approvals = stores
    for _ in range(5):
        _race_decision_and_cancel(runs, approvals)
    entries, heads = approvals.audit_log()
    assert examine(entries, heads).problems == []


def test_list_approvals_finds_those_a_person_may_decide(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """Only approvals listing the person as approver (or, escalated, as escalation) match."""
    runs, approvals = stores
    run_id = _waiting_run(runs)
    mine, theirs, escalated = (_approval(run_id, p) for p in (3, 5, 7))
    theirs = dataclasses.replace(theirs, policy=PolicySnapshot(approvers=("U_OMAR",)))
    escalated = dataclasses.replace(
        escalated,
        escalated=True,
        policy=PolicySnapshot(approvers=("U_DANA",), escalate_to=("U_BOSS",)),
    )
    for approval in (mine, theirs, escalated):
        approvals.create_approval(approval, _draft(approval, "requested"))
    assert [a.id for a in approvals.list_approvals(decidable_by="U_DANA")] == [mine.id]
    assert [a.id for a in approvals.list_approvals(decidable_by="U_BOSS")] == [escalated.id]
    assert [a.id for a in approvals.list_approvals(decidable_by="U_OMAR")] == [theirs.id]
    assert approvals.list_approvals(decidable_by="U_DAN") == []
    assert [a.id for a in approvals.list_approvals(limit=1, after=escalated.id)] == [theirs.id]


def test_lists_of_what_waits_on_a_person_page_oldest_first_and_count(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """Several approver entries match any of them; oldest first pages forward; the
    requester's workspace (or none) filters; the count agrees with the list."""
    runs, approvals = stores
    run_id = _waiting_run(runs)
    plain, scoped, elsewhere, unscoped, other = (_approval(run_id, p) for p in (1, 2, 3, 4, 5))
    here, there = Actor(user_id="U_REQ", team_id="T1"), Actor(user_id="U_REQ", team_id="T2")
    grid = Actor(user_id="U_REQ", team_id="T9", enterprise_id="E1")
    plain = dataclasses.replace(plain, requester=here)
    scoped = dataclasses.replace(
        scoped, requester=grid, policy=PolicySnapshot(approvers=("U_DANA@E1",))
    )
    elsewhere = dataclasses.replace(elsewhere, requester=there)
    other = dataclasses.replace(other, policy=PolicySnapshot(approvers=("U_OMAR",)))
    for approval in (plain, scoped, elsewhere, unscoped, other):
        approvals.create_approval(approval, _draft(approval, "requested"))
    dana = ("U_DANA", "U_DANA@E1")
    pending = ApprovalStatus.PENDING
    oldest = approvals.list_approvals(decidable_by=dana, oldest_first=True, status=pending)
    assert [a.id for a in oldest] == [plain.id, scoped.id, elsewhere.id, unscoped.id]
    page = approvals.list_approvals(decidable_by=dana, oldest_first=True, after=scoped.id)
    assert [a.id for a in page] == [elsewhere.id, unscoped.id]
    in_t1 = approvals.list_approvals(decidable_by=dana, workspace="T1", oldest_first=True)
    assert [a.id for a in in_t1] == [plain.id, unscoped.id]
    in_e1 = approvals.list_approvals(decidable_by=dana, workspace="E1", limit=1)
    assert [a.id for a in in_e1] == [unscoped.id]
    assert approvals.count_approvals(decidable_by=dana, status=pending) == 4
    assert approvals.count_approvals(decidable_by=dana, workspace="T1") == 2
    assert approvals.count_approvals(decidable_by=dana, workspace="E1") == 2
    assert approvals.count_approvals(decidable_by="U_OMAR", workspace="T2") == 1
    assert approvals.count_approvals(status=ApprovalStatus.APPROVED) == 0


RULE = Actor(user_id="rule:small-refunds", name="rule:small-refunds")


def _ruling(
    approval: Approval,
    *,
    limit: int | None = None,
    seen: list[int] | None = None,
) -> Ruling:
    decided = dataclasses.replace(_approved(approval), decided_by=RULE)

    def allowed(used: Sequence[Approval]) -> bool:
        if seen is not None:
            seen.append(len(used))
        return limit is None or len(used) < limit

    return Ruling(
        since=T0 - timedelta(days=1),
        shadows=[_draft(approval, "rule.shadow")],
        decided=decided,
        decision=_draft(approval, "approve"),
        limited=_draft(approval, "rule.limited"),
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
    run_id = _waiting_run(runs)
    approval = _approval(run_id)
    ruling = dataclasses.replace(_ruling(approval, limit=1), notices=_notices(approval, "decided"))
    stored = approvals.create_ruled_approval(
        approval, _draft(approval, "requested"), _notices(approval, "asked"), ruling
    )
    assert _queued(runs) == [f"decided:{approval.id}"]
    assert (stored.status, stored.version) == (ApprovalStatus.APPROVED, 1)
    assert approvals.get_approval(approval.id) == stored
    assert runs.get_run(run_id).status == RunStatus.PENDING
    entries, heads = approvals.audit_log()
    assert [e.action for e in entries] == ["requested", "rule.shadow", "approve"]
    assert examine(entries, heads).problems == []
    again = approvals.create_ruled_approval(
        approval, _draft(approval, "requested"), (), _ruling(approval)
    )
    assert again == stored
    assert len(approvals.audit_log()[0]) == 3


def test_a_ruling_past_its_limit_leaves_the_approval_pending(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """A rule's earlier approvals count against it: past the limit, nothing is decided."""
    runs, approvals = stores
    run_id = _waiting_run(runs)
    first, second = _approval(run_id, position=3), _approval(run_id, position=5)
    seen: list[int] = []
    approvals.create_ruled_approval(
        first, _draft(first, "requested"), (), _ruling(first, limit=1, seen=seen)
    )
    stored = approvals.create_ruled_approval(
        second,
        _draft(second, "requested"),
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
    asked = [_approval(_waiting_run(runs), position=n) for n in range(6)]
    start = threading.Barrier(len(asked))
    results: list[Approval] = []

    def request(approval: Approval) -> None:
        start.wait(timeout=30)
        results.append(
            approvals.create_ruled_approval(
                approval, _draft(approval, "requested"), (), _ruling(approval, limit=1)
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
