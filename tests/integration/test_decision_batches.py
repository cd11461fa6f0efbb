"""Decisions saved together: each keeps the meaning of a lone compare-and-set."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import Connection, select

from agent_runtime import RunId, RunStatus
from agent_runtime.approvals import Approval, ApprovalStatus
from agent_runtime.audit_keys import AuditKeys
from agent_runtime.exceptions import ApprovalNotFound
from agent_runtime.notices import Notice
from agent_runtime.records import Event
from agent_runtime.store import Judge, Save
from store import SqlStore
from store.approval_saves import ChangedUnderLock, Deciding, decide_many, save_many
from store.approval_store import SqlApprovalStore
from store.models import outbox
from tests.contract.approvals import (
    KEYS,
    T0,
    an_approval,
    approved,
    chains_sound,
    draft,
    pending,
    waiting_run,
)
from tests.integration import wait_until

WAIT_S = 60


@pytest.fixture(params=["sqlite", "postgres"])
def sql(request: pytest.FixtureRequest) -> SqlStore:
    """The run store on each SQL database."""
    store: SqlStore = request.getfixturevalue(
        "sqlite_store" if request.param == "sqlite" else "pg_store"
    )
    return store


def decision(approval: Approval, *, notices: Sequence[Notice] = ()) -> Save:
    """The save of ``approval`` approved, waking its run, with ``notices``."""
    wake = Event(key="approval:x", data={"status": "approved"}, delivered_at=T0)
    decided = approved(approval)
    return Save(decided, draft(decided, "approve"), T0, wake, tuple(notices))


def test_a_batch_saves_each_wakes_each_run_and_chains_each_entry(sql: SqlStore) -> None:
    """Every decision of a batch is saved, its run woken, its notice queued and its audit
    entry chained so that every chain still verifies."""
    approvals = SqlApprovalStore(sql.engine, audit_keys=KEYS)
    batch = pending(sql, approvals, 6)
    notices = [Notice(key=f"n:{a.id}", run_id=a.run_id, kind="reply") for a in batch]
    saves = [decision(a, notices=[n]) for a, n in zip(batch, notices, strict=True)]
    assert approvals.save_approvals(saves) == [True] * 6
    for approval in batch:
        stored = approvals.get_approval(approval.id)
        assert (stored.status, stored.version) == (ApprovalStatus.APPROVED, 1)
        assert sql.get_run(RunId(approval.run_id)).status == RunStatus.PENDING
        assert sql.get_event(RunId(approval.run_id), "approval:x") is not None
    with sql.engine.connect() as conn:
        queued = set(conn.execute(select(outbox.c.key)).scalars())
    assert {n.key for n in notices} <= queued
    entries, _ = approvals.audit_log()
    assert sorted(e.approval_id for e in entries if e.action == "approve") == sorted(
        a.id for a in batch
    )
    chains_sound(approvals)


def test_the_first_decision_of_an_approval_in_a_batch_wins(sql: SqlStore) -> None:
    """Two decisions judged on the same version of one approval: the first in the batch is
    saved, the second fails its compare-and-set, as if they had been saved one by one."""
    approvals = SqlApprovalStore(sql.engine, audit_keys=KEYS)
    (approval,) = pending(sql, approvals, 1)
    first = decision(approval)
    rejected = replace(approved(approval), status=ApprovalStatus.REJECTED, reason="no")
    second = Save(rejected, draft(rejected, "reject"), T0, None, ())
    assert approvals.save_approvals([first, second]) == [True, False]
    assert approvals.get_approval(approval.id).status == ApprovalStatus.APPROVED
    assert [e.action for e in approvals.audit_log()[0]] == ["requested", "approve"]


def test_a_decision_after_its_deadline_fails_alone_in_a_batch(sql: SqlStore) -> None:
    """The deadline stays part of each compare-and-set: a late decision is not saved, and
    the others of its batch are."""
    approvals = SqlApprovalStore(sql.engine, audit_keys=KEYS)
    on_time = pending(sql, approvals, 1)[0]
    short = an_approval(waiting_run(sql), deadline=timedelta(minutes=5))
    approvals.create_approval(short, draft(short, "requested"))
    late = approved(short)
    saves = [
        decision(on_time),
        Save(late, draft(late, "approve"), T0 + timedelta(minutes=5), None, ()),
    ]
    assert approvals.save_approvals(saves) == [True, False]
    assert approvals.get_approval(short.id).status == ApprovalStatus.PENDING
    assert approvals.get_approval(on_time.id).status == ApprovalStatus.APPROVED


def test_a_save_that_breaks_its_batch_fails_alone(sql: SqlStore) -> None:
    """A save the database refuses (here a notice that cannot be stored) fails its batch;
    each is then saved alone, so only that save's caller gets the error."""
    approvals = SqlApprovalStore(sql.engine, audit_keys=KEYS)
    good, bad, other = pending(sql, approvals, 3)
    broken = Notice(key="n:bad", run_id=bad.run_id, kind="reply", data={"x": object()})
    outcomes = approvals.save_approvals(
        [decision(good), decision(bad, notices=[broken]), decision(other)]
    )
    assert outcomes[0] is True
    assert outcomes[2] is True
    assert isinstance(outcomes[1], Exception)
    assert approvals.get_approval(bad.id).status == ApprovalStatus.PENDING
    assert sql.get_run(RunId(bad.run_id)).status == RunStatus.WAITING
    chains_sound(approvals)


@pytest.fixture
def batch_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch saved in one transaction, in order."""
    sizes: list[int] = []

    def counted(conn: Connection, keys: AuditKeys | None, saves: Sequence[Save]) -> list[bool]:
        sizes.append(len(saves))
        return save_many(conn, keys, saves)

    monkeypatch.setattr("store.approval_store.save_many", counted)
    return sizes


def test_concurrent_decisions_are_saved_together(sql: SqlStore, batch_sizes: list[int]) -> None:
    """Threads deciding while a save is under way are saved in one batch after it, and
    every one of them lands."""
    approvals = SqlApprovalStore(sql.engine, audit_keys=KEYS)
    batch = pending(sql, approvals, 8)
    group = approvals._saves
    outcomes: dict[str, bool] = {}
    lock = threading.Lock()
    first_started, release = threading.Event(), threading.Event()
    saved_alone = approvals._save_alone

    def held_alone(save: Save, grant: object = None) -> bool:
        if save.approval.id == batch[0].id:
            first_started.set()
            assert release.wait(WAIT_S)
        return saved_alone(save)

    approvals._save_alone = held_alone  # type: ignore[method-assign]

    def decide(approval: Approval) -> None:
        saved = approvals.save_approval(
            approved(approval),
            audit=draft(approval, "approve"),
            decided_before=T0,
            wake=Event(key="approval:x", data={}, delivered_at=T0),
        )
        with lock:
            outcomes[approval.id] = saved

    first = threading.Thread(target=decide, args=(batch[0],))
    first.start()
    assert first_started.wait(WAIT_S)
    others = [threading.Thread(target=decide, args=(a,)) for a in batch[1:]]
    for thread in others:
        thread.start()
    wait_until(
        lambda: group.waiting == 7, timeout=WAIT_S, what="the others to wait", interval=0.005
    )
    release.set()
    for thread in [first, *others]:
        thread.join(WAIT_S)
    assert outcomes == {a.id: True for a in batch}
    assert batch_sizes == [7]
    assert all(sql.get_run(RunId(a.run_id)).status == RunStatus.PENDING for a in batch)
    chains_sound(approvals)


def approving(seen: list[Approval]) -> Judge:
    """A judge that notes the approval it is given and approves it if it is pending."""

    def judge(current: Approval) -> Save | None:
        seen.append(current)
        return decision(current) if current.status == ApprovalStatus.PENDING else None

    return judge


def test_each_decision_is_judged_on_what_the_one_before_it_left(sql: SqlStore) -> None:
    """Two decisions of one approval in one transaction: the second judge is given the
    approval as the first saved it, so it decides on the truth instead of failing a
    compare-and-set."""
    approvals = SqlApprovalStore(sql.engine, audit_keys=KEYS)
    (approval,) = pending(sql, approvals, 1)
    seen: list[Approval] = []
    with sql.engine.begin() as conn:
        outcomes = decide_many(
            conn,
            KEYS,
            [Deciding(approval.id, approving(seen)), Deciding(approval.id, approving(seen))],
        )
    assert [(a.status, a.version) for a in seen] == [
        (ApprovalStatus.PENDING, 0),
        (ApprovalStatus.APPROVED, 1),
    ]
    first, second = outcomes
    assert not isinstance(first, BaseException)
    assert first[1] is not None
    assert second == (seen[1], None)
    assert approvals.get_approval(approval.id).version == 1
    assert [e.action for e in approvals.audit_log()[0]] == ["requested", "approve"]


def test_a_judge_that_raises_or_an_unknown_approval_fails_alone(sql: SqlStore) -> None:
    """A judge's exception and an approval that does not exist are those decisions' own
    outcomes; the other decisions of the transaction are saved."""
    approvals = SqlApprovalStore(sql.engine, audit_keys=KEYS)
    good, broken = pending(sql, approvals, 2)

    def raising(current: Approval) -> Save | None:
        raise ValueError("judge failed")

    with sql.engine.begin() as conn:
        outcomes = decide_many(
            conn,
            KEYS,
            [
                Deciding(broken.id, raising),
                Deciding("0" * 24, approving([])),
                Deciding(good.id, approving([])),
            ],
        )
    assert isinstance(outcomes[0], ValueError)
    assert isinstance(outcomes[1], ApprovalNotFound)
    assert approvals.get_approval(good.id).status == ApprovalStatus.APPROVED
    assert approvals.get_approval(broken.id).status == ApprovalStatus.PENDING
    assert sql.get_run(RunId(good.run_id)).status == RunStatus.PENDING
    chains_sound(approvals)


def test_a_save_not_judged_on_the_stored_approval_is_refused(sql: SqlStore) -> None:
    """A judge that returns a save made from another version of the approval fails, and
    nothing of it is saved."""
    approvals = SqlApprovalStore(sql.engine, audit_keys=KEYS)
    (approval,) = pending(sql, approvals, 1)
    stale = replace(approval, version=7)
    with pytest.raises(ChangedUnderLock):
        approvals.decide_approval(approval.id, lambda current: decision(stale))
    assert approvals.get_approval(approval.id).status == ApprovalStatus.PENDING


def test_concurrent_decisions_are_judged_and_saved_together(sql: SqlStore) -> None:
    """Threads deciding while a decision is under way are judged and saved in one
    transaction after it, each under its approval's lock, and every one lands."""
    approvals = SqlApprovalStore(sql.engine, audit_keys=KEYS)
    batch = pending(sql, approvals, 8)
    first_judged, release = threading.Event(), threading.Event()
    results: dict[str, object] = {}
    lock = threading.Lock()

    def held(current: Approval) -> Save | None:
        first_judged.set()
        assert release.wait(WAIT_S)
        return decision(current)

    def decide(approval: Approval, judge: Judge) -> None:
        outcome = approvals.decide_approval(approval.id, judge)
        with lock:
            results[approval.id] = outcome

    first = threading.Thread(target=decide, args=(batch[0], held))
    first.start()
    assert first_judged.wait(WAIT_S)
    others = [threading.Thread(target=decide, args=(a, approving([]))) for a in batch[1:]]
    for thread in others:
        thread.start()
    wait_until(
        lambda: approvals._decisions.waiting == 7,
        timeout=WAIT_S,
        what="the others to wait",
        interval=0.005,
    )
    before = approvals.save_batches
    release.set()
    for thread in [first, *others]:
        thread.join(WAIT_S)
    assert len(results) == 8
    assert approvals.save_batches[0] - before[0] == 1  # the seven went in one batch
    assert all(approvals.get_approval(a.id).status == ApprovalStatus.APPROVED for a in batch)
    assert all(sql.get_run(RunId(a.run_id)).status == RunStatus.PENDING for a in batch)
    chains_sound(approvals)
