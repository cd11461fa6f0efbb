"""The ApprovalStore contract: in-memory, SQLite and PostgreSQL behave the same."""

from __future__ import annotations

import dataclasses
import threading
from datetime import timedelta

import pytest

from agent_runtime import (
    ApprovalNotFound,
    ApprovalNotPending,
    RunId,
    RunStatus,
    Store,
)
from agent_runtime.approvals import (
    Actor,
    Approval,
    ApprovalStatus,
)
from agent_runtime.audit import AUDIT_SHARDS, AuditDraft, shard_of
from agent_runtime.audit_keys import AuditKeys
from agent_runtime.audit_report import examine
from agent_runtime.notices import Notice
from agent_runtime.policy import PolicySnapshot
from agent_runtime.records import Event
from agent_runtime.store import ApprovalStore, Save
from agent_runtime.testing import InMemoryApprovalStore, InMemoryStore
from store import SqlStore
from store.approval_store import SqlApprovalStore
from tests.contract.approvals import (
    DANA,
    KEYS,
    T0,
    an_approval,
    approved,
    draft,
    stores,
    waiting_run,
)

__all__ = ["stores"]  # the fixture, for pytest


def test_approval_round_trips_and_create_is_idempotent(stores: tuple[Store, ApprovalStore]) -> None:
    """A created approval reads back equal; creating the same id again keeps the first."""
    runs, approvals = stores
    approval = an_approval(waiting_run(runs))
    assert approvals.create_approval(approval, draft(approval, "requested")) == approval
    again = dataclasses.replace(approval, tool="other")
    assert approvals.create_approval(again, draft(again, "requested")) == approval
    assert approvals.get_approval(approval.id) == approval
    assert [e.action for e in approvals.audit_log()[0]] == ["requested"]


def test_unknown_approval_is_not_found(stores: tuple[Store, ApprovalStore]) -> None:
    """Reading an unknown approval raises ApprovalNotFound."""
    with pytest.raises(ApprovalNotFound):
        stores[1].get_approval("nope")


def test_save_is_a_compare_and_set_on_version(stores: tuple[Store, ApprovalStore]) -> None:
    """Only a save based on the stored version wins; the loser changes nothing."""
    runs, approvals = stores
    approval = an_approval(waiting_run(runs))
    approvals.create_approval(approval, draft(approval, "requested"))
    first = approved(approval)
    second = dataclasses.replace(first, status=ApprovalStatus.REJECTED, reason="no")
    assert approvals.save_approval(
        first, audit=draft(first, "approve"), decided_before=T0, wake=None
    )
    assert not approvals.save_approval(
        second, audit=draft(second, "reject"), decided_before=T0, wake=None
    )
    stored = approvals.get_approval(approval.id)
    assert (stored.status, stored.version) == (ApprovalStatus.APPROVED, 1)
    assert [e.action for e in approvals.audit_log()[0]] == ["requested", "approve"]


def test_decision_after_the_deadline_cannot_win(stores: tuple[Store, ApprovalStore]) -> None:
    """The deadline is part of the compare-and-set: a decision at or after it is not saved."""
    runs, approvals = stores
    approval = an_approval(waiting_run(runs), deadline=timedelta(minutes=5))
    approvals.create_approval(approval, draft(approval, "requested"))
    late = T0 + timedelta(minutes=5)
    assert not approvals.save_approval(
        approved(approval), audit=draft(approval, "approve"), decided_before=late, wake=None
    )
    assert approvals.get_approval(approval.id).status == ApprovalStatus.PENDING


def test_final_decision_wakes_the_waiting_run(stores: tuple[Store, ApprovalStore]) -> None:
    """Saving with a wake event delivers it in the same transaction and makes the run due."""
    runs, approvals = stores
    run_id = waiting_run(runs)
    approval = an_approval(run_id)
    approvals.create_approval(approval, draft(approval, "requested"))
    assert runs.get_run(run_id).status == RunStatus.WAITING
    event = Event(key="approval:x", data={"status": "approved"}, delivered_at=T0)
    assert approvals.save_approval(
        approved(approval), audit=draft(approval, "approve"), decided_before=T0, wake=event
    )
    assert runs.get_run(run_id).status == RunStatus.PENDING
    assert runs.get_event(run_id, "approval:x") is not None


def test_consume_allows_one_execution(stores: tuple[Store, ApprovalStore]) -> None:
    """An approval is consumed by one journal position; the same position may repeat."""
    runs, approvals = stores
    approval = an_approval(waiting_run(runs))
    approvals.create_approval(approval, draft(approval, "requested"))
    assert approvals.consume_approval(approval.id, 8)
    assert approvals.consume_approval(approval.id, 8)
    assert not approvals.consume_approval(approval.id, 12)


def test_due_approvals_by_deadline_or_reminder(stores: tuple[Store, ApprovalStore]) -> None:
    """Pending approvals are due at their reminder time or deadline; decided ones never."""
    runs, approvals = stores
    run_id = waiting_run(runs)
    first, second = an_approval(run_id, 3), an_approval(run_id, 7)
    for approval in (first, second):
        approvals.create_approval(approval, draft(approval, "requested"))
    approvals.save_approval(
        approved(second), audit=draft(second, "approve"), decided_before=T0, wake=None
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
    run_id = waiting_run(runs)
    asked = [
        dataclasses.replace(an_approval(run_id, position), remind_at=T0 + timedelta(minutes=minute))
        for position, minute in ((3, 30), (5, 10), (7, 20))
    ]
    for approval in asked:
        approvals.create_approval(approval, draft(approval, "requested"))
    due = approvals.due_approvals(T0 + timedelta(minutes=25), 1)
    assert [a.id for a in due] == [asked[1].id]
    due = approvals.due_approvals(T0 + timedelta(minutes=25), 10)
    assert [a.id for a in due] == [asked[1].id, asked[2].id]


def test_audit_chain_verifies(stores: tuple[Store, ApprovalStore]) -> None:
    """Entries from concurrent appends form one unbroken chain that matches its head."""
    runs, approvals = stores
    approval = an_approval(waiting_run(runs))
    approvals.create_approval(approval, draft(approval, "requested"))
    threads = [
        threading.Thread(
            target=lambda: [
                approvals.append_audit(draft(approval, "unauthorized")) for _ in range(5)
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
    asked = [an_approval(waiting_run(runs)) for _ in range(8)]
    for approval in asked:
        approvals.create_approval(approval, draft(approval, "requested"))

    def decide(approval: Approval) -> None:
        assert approvals.save_approval(
            approved(approval), audit=draft(approval, "approve"), decided_before=T0, wake=None
        )
        approvals.append_audit(draft(approval, "late"))

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
    approval = an_approval(waiting_run(runs))
    approvals.create_approval(approval, draft(approval, "requested"))
    approvals.save_approval(
        approved(approval), audit=draft(approval, "approve"), decided_before=T0, wake=None
    )
    approvals.append_audit(draft(approval, "late"))
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
    return closed, draft(approval, "closed"), []


def test_cancel_run_closes_its_pending_approvals_with_it(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """Cancelling a run rejects its pending approvals and audits each, leaving others alone."""
    runs, approvals = stores
    run_id, other = waiting_run(runs), waiting_run(runs)
    first, second, elsewhere = an_approval(run_id, 3), an_approval(run_id, 5), an_approval(other, 3)
    for approval in (first, second, elsewhere):
        approvals.create_approval(approval, draft(approval, "requested"))
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
    run_id = waiting_run(runs)
    approval = an_approval(run_id)
    approvals.create_approval(approval, draft(approval, "requested"))

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
    run_id = waiting_run(runs)
    approval, other = an_approval(run_id, 3), an_approval(run_id, 5)
    for each in (approval, other):
        approvals.create_approval(each, draft(each, "requested"))
    decided = approved(approval)
    assert approvals.save_approval(
        decided, audit=draft(decided, "approve"), decided_before=T0, wake=None
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
    run_id = waiting_run(runs)
    approval = an_approval(run_id)
    approvals.create_approval(approval, draft(approval, "requested"))
    ended = approvals.cancel_run(run_id, T0, [], _closed, while_pending=approval.id)
    assert ended.status == RunStatus.CANCELLED
    assert approvals.get_approval(approval.id).status == ApprovalStatus.REJECTED


def _race_decision_and_cancel(runs: Store, approvals: ApprovalStore) -> None:
    """Start a decision and a conditioned cancel on one approval at once; check one won."""
    run_id = waiting_run(runs)
    approval = an_approval(run_id)
    approvals.create_approval(approval, draft(approval, "requested"))
    start = threading.Barrier(2)
    outcome: dict[str, bool] = {}

    def decide() -> None:
        start.wait(timeout=30)
        decided = approved(approval)
        outcome["decided"] = approvals.save_approval(
            decided, audit=draft(decided, "approve"), decided_before=T0, wake=None
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
    run_id = waiting_run(runs)
    mine, theirs, escalated = (an_approval(run_id, p) for p in (3, 5, 7))
    theirs = dataclasses.replace(theirs, policy=PolicySnapshot(approvers=("U_OMAR",)))
    escalated = dataclasses.replace(
        escalated,
        escalated=True,
        policy=PolicySnapshot(approvers=("U_DANA",), escalate_to=("U_BOSS",)),
    )
    for approval in (mine, theirs, escalated):
        approvals.create_approval(approval, draft(approval, "requested"))
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
    run_id = waiting_run(runs)
    plain, scoped, elsewhere, unscoped, other = (an_approval(run_id, p) for p in (1, 2, 3, 4, 5))
    here, there = Actor(user_id="U_REQ", team_id="T1"), Actor(user_id="U_REQ", team_id="T2")
    grid = Actor(user_id="U_REQ", team_id="T9", enterprise_id="E1")
    plain = dataclasses.replace(plain, requester=here)
    scoped = dataclasses.replace(
        scoped, requester=grid, policy=PolicySnapshot(approvers=("U_DANA@E1",))
    )
    elsewhere = dataclasses.replace(elsewhere, requester=there)
    other = dataclasses.replace(other, policy=PolicySnapshot(approvers=("U_OMAR",)))
    for approval in (plain, scoped, elsewhere, unscoped, other):
        approvals.create_approval(approval, draft(approval, "requested"))
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


def test_decide_approval_judges_the_stored_approval_and_saves_its_verdict(
    stores: tuple[Store, ApprovalStore],
) -> None:
    """The judge is given the approval as stored; a save it returns is written with its
    audit entry and wakes the run; None writes nothing; an unknown id is ApprovalNotFound."""
    runs, approvals = stores
    approval = an_approval(waiting_run(runs))
    approvals.create_approval(approval, draft(approval, "requested"))
    given: list[Approval] = []

    def nothing(current: Approval) -> Save | None:
        given.append(current)
        return None

    assert approvals.decide_approval(approval.id, nothing) == (approval, None)
    assert approvals.get_approval(approval.id) == approval

    def approve(current: Approval) -> Save | None:
        decided = approved(current)
        wake = Event(key="approval:x", data={"status": "approved"}, delivered_at=T0)
        return Save(decided, draft(decided, "approve"), T0, wake, ())

    seen, save = approvals.decide_approval(approval.id, approve)
    assert seen == approval
    assert save is not None
    stored = approvals.get_approval(approval.id)
    assert (stored.status, stored.version) == (ApprovalStatus.APPROVED, 1)
    assert runs.get_run(RunId(approval.run_id)).status == RunStatus.PENDING
    assert [e.action for e in approvals.audit_log()[0]] == ["requested", "approve"]
    with pytest.raises(ApprovalNotFound):
        approvals.decide_approval("nope", nothing)
    assert given == [approval]
