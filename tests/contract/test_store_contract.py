"""The Store contract: every implementation (in-memory, SQLite, PostgreSQL) behaves the same."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_runtime import (
    AttemptConflict,
    AttemptRecord,
    ErrorInfo,
    EventAlreadyDelivered,
    Fork,
    InvalidRunState,
    JournalConflict,
    Lease,
    LeaseLost,
    RunExists,
    RunId,
    RunNotFound,
    RunStatus,
    StepKind,
    StepRecord,
    Store,
    Wait,
    new_run_id,
)
from agent_runtime.notices import Notice
from agent_runtime.testing import InMemoryStore
from store import SqlStore
from store.outbox import SqlOutbox

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=30)


def _new(store: Store, input: Any = None, at: datetime = T0) -> RunId:
    return store.create_run(new_run_id(), "wf", input, at).id


def _claim_one(store: Store, owner: str = "w1", now: datetime = T0) -> Lease:
    claimed = store.claim_runs(owner, limit=1, now=now, expires_at=now + TTL)
    assert len(claimed) == 1
    return claimed[0][1]


def _step(position: int, output: Any = None, error: ErrorInfo | None = None) -> StepRecord:
    return StepRecord(
        position=position,
        kind=StepKind.STEP,
        name=f"s{position}",
        input_hash="0123456789abcdef",
        output=output,
        error=error,
        attempts=1,
        started_at=T0,
        finished_at=T0 + timedelta(milliseconds=5),
    )


def test_created_run_reads_back(any_store: Store) -> None:
    """A new run is pending, due now, and its JSON input reads back unchanged."""
    data = {"text": 'héllo "quoted" 🎉', "n": [1, 2.5, None, True]}
    run_id = _new(any_store, data)
    run = any_store.get_run(run_id)
    assert (run.status, run.input, run.workflow, run.due_at) == (RunStatus.PENDING, data, "wf", T0)
    assert run.created_at == T0
    assert run.created_at.tzinfo is not None


def test_unknown_run_is_not_found(any_store: Store) -> None:
    """Reading, cancelling or signalling an unknown run raises RunNotFound."""
    missing = new_run_id()
    with pytest.raises(RunNotFound):
        any_store.get_run(missing)
    with pytest.raises(RunNotFound):
        any_store.cancel(missing, T0)
    with pytest.raises(RunNotFound):
        any_store.deliver_event(missing, "k", None, T0)


def test_list_runs_newest_first_and_by_status(any_store: Store) -> None:
    """Listing returns the newest runs first and filters by status."""
    first = _new(any_store, at=T0)
    second = _new(any_store, at=T0 + timedelta(seconds=1))
    any_store.cancel(first, T0)
    assert [r.id for r in any_store.list_runs()] == [second, first]
    assert [r.id for r in any_store.list_runs(status=RunStatus.CANCELLED)] == [first]
    assert [r.id for r in any_store.list_runs(limit=1)] == [second]


def test_claim_leases_a_run_once(any_store: Store) -> None:
    """A claimed run is running under a new fence and no other worker can claim it."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    run = any_store.get_run(run_id)
    assert (run.status, run.lease_owner, run.fence, lease.fence) == (RunStatus.RUNNING, "w1", 1, 1)
    assert any_store.claim_runs("w2", limit=5, now=T0, expires_at=T0 + TTL) == []


def test_claim_respects_limit_and_due_time(any_store: Store) -> None:
    """A claim takes at most ``limit`` runs and none created after ``now``."""
    for _ in range(3):
        _new(any_store)
    _new(any_store, at=T0 + timedelta(hours=1))
    assert len(any_store.claim_runs("w1", limit=2, now=T0, expires_at=T0 + TTL)) == 2
    assert len(any_store.claim_runs("w1", limit=5, now=T0, expires_at=T0 + TTL)) == 1


def test_expired_lease_is_taken_over_and_old_holder_is_fenced(any_store: Store) -> None:
    """After expiry another worker claims the run; the old holder can neither write nor renew."""
    run_id = _new(any_store)
    old = _claim_one(any_store, "w1")
    any_store.append_step(old, _step(0))
    later = T0 + TTL + timedelta(seconds=1)
    new = _claim_one(any_store, "w2", now=later)
    assert new.fence > old.fence
    with pytest.raises(LeaseLost):
        any_store.append_step(old, _step(1))
    with pytest.raises(LeaseLost):
        any_store.complete(old, "late", later)
    assert any_store.renew_lease(old, later + TTL) is False
    assert any_store.renew_lease(new, later + TTL) is True
    any_store.append_step(new, _step(1))
    assert [s.position for s in any_store.load_journal(run_id)] == [0, 1]


def test_a_claim_says_which_runs_it_took_over(any_store: Store) -> None:
    """A claim of a run whose lease lapsed says so; a first claim or a claim after a release
    does not."""
    _new(any_store)
    first = _claim_one(any_store, "w1")
    assert first.taken_over is False
    later = T0 + TTL + timedelta(seconds=1)
    taken = _claim_one(any_store, "w2", now=later)
    assert taken.taken_over is True
    any_store.release(taken, later)
    again = _claim_one(any_store, "w3", now=later)
    assert again.taken_over is False


def test_renewed_lease_is_not_claimable(any_store: Store) -> None:
    """Renewing moves the lease's expiry, so the run is not claimable before it."""
    _new(any_store)
    lease = _claim_one(any_store)
    assert any_store.renew_lease(lease, T0 + TTL * 3)
    later = T0 + TTL * 2
    assert any_store.claim_runs("w2", limit=1, now=later, expires_at=later + TTL) == []


def test_leases_renewed_together_report_the_lost_ones(any_store: Store) -> None:
    """One batch renewal extends every held lease and returns the one taken over meanwhile."""
    _new(any_store), _new(any_store)
    first, second = (
        lease for _, lease in any_store.claim_runs("w1", limit=2, now=T0, expires_at=T0 + TTL)
    )
    later = T0 + TTL + timedelta(seconds=1)
    any_store.renew_lease(first, later + TTL)  # the first stays held, the second lapses
    taken = _claim_one(any_store, "w2", now=later)
    assert taken.run_id == second.run_id
    assert any_store.renew_leases([first, second], later + TTL * 3) == [second]
    still_held = any_store.claim_runs(
        "w3", limit=2, now=later + TTL * 2, expires_at=later + TTL * 4
    )
    assert [lease.run_id for _, lease in still_held] == [second.run_id], "w2's lapsed"
    assert any_store.renew_leases([], later) == []


def test_journal_round_trips_in_order(any_store: Store) -> None:
    """Journal entries read back in position order with their outputs, errors and times."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    error = ErrorInfo(type="ValueError", message="bad")
    entries = [_step(0, {"a": [1, "ü"]}), _step(1, None), _step(2, error=error), _step(3, "x")]
    for entry in entries:
        any_store.append_step(lease, entry)
    assert any_store.load_journal(run_id) == entries


def test_duplicate_position_is_a_journal_conflict(any_store: Store) -> None:
    """A second entry at a taken position raises JournalConflict and keeps the first."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    any_store.append_step(lease, _step(0, "first"))
    with pytest.raises(JournalConflict):
        any_store.append_step(lease, _step(0, "second"))
    assert [s.output for s in any_store.load_journal(run_id)] == ["first"]


def test_attempts_are_recorded_under_the_lease(any_store: Store) -> None:
    """Failed attempts are kept in order, and only the lease holder can add them."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    attempts = [
        AttemptRecord(position=0, attempt=n, error=ErrorInfo(type="E", message=str(n)), at=T0)
        for n in (1, 2)
    ]
    for attempt in attempts:
        any_store.record_attempt(lease, attempt)
    assert any_store.list_attempts(run_id) == attempts
    with pytest.raises(LeaseLost):
        any_store.record_attempt(Lease(run_id, "w1", lease.fence + 7), attempts[0])


def _failed(attempt: int, message: str = "bad") -> AttemptRecord:
    return AttemptRecord(
        position=0, attempt=attempt, error=ErrorInfo(type="E", message=message), at=T0
    )


def test_recording_a_taken_attempt_number_is_an_attempt_conflict(any_store: Store) -> None:
    """A second record of the same attempt of a step raises AttemptConflict and keeps the first."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    any_store.record_attempt(lease, _failed(1, "first"))
    with pytest.raises(AttemptConflict) as raised:
        any_store.record_attempt(lease, _failed(1, "second"))
    assert (raised.value.position, raised.value.attempt) == (0, 1)
    assert any_store.list_attempts(run_id) == [_failed(1, "first")]


def test_timer_wait_becomes_due_at_its_time(any_store: Store) -> None:
    """A run suspended until a time is waiting, unclaimable before it and claimable after."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    wake = T0 + timedelta(minutes=5)
    assert any_store.suspend(lease, Wait(wake_at=wake), T0) == RunStatus.WAITING
    run = any_store.get_run(run_id)
    assert (run.status, run.due_at, run.lease_owner) == (RunStatus.WAITING, wake, None)
    assert (
        any_store.claim_runs("w", limit=1, now=wake - timedelta(seconds=1), expires_at=wake + TTL)
        == []
    )
    assert any_store.next_due() == wake
    assert len(any_store.claim_runs("w", limit=1, now=wake, expires_at=wake + TTL)) == 1


def test_event_wakes_a_waiting_run_once(any_store: Store) -> None:
    """Delivering the awaited event makes the run pending; the same key twice is refused."""
    run_id = _new(any_store)
    any_store.suspend(_claim_one(any_store), Wait(wake_at=None, key="go"), T0)
    assert any_store.claim_runs("w", limit=1, now=T0 + TTL * 10, expires_at=T0 + TTL * 11) == []
    run = any_store.deliver_event(run_id, "go", {"ok": True}, T0)
    assert (run.status, run.wait_key) == (RunStatus.PENDING, None)
    event = any_store.get_event(run_id, "go")
    assert event is not None
    assert event.data == {"ok": True}
    with pytest.raises(EventAlreadyDelivered):
        any_store.deliver_event(run_id, "go", {"ok": False}, T0)
    assert any_store.get_event(run_id, "go").data == {"ok": True}  # type: ignore[union-attr]


def test_event_for_another_key_does_not_wake(any_store: Store) -> None:
    """An event under a different key is stored but leaves the run waiting."""
    run_id = _new(any_store)
    any_store.suspend(_claim_one(any_store), Wait(wake_at=None, key="go"), T0)
    assert any_store.deliver_event(run_id, "other", 1, T0).status == RunStatus.WAITING


def test_suspend_for_an_event_already_delivered_stays_runnable(any_store: Store) -> None:
    """Suspending for an event that arrived meanwhile leaves the run pending, not stranded."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    any_store.deliver_event(run_id, "go", 1, T0)
    assert any_store.suspend(lease, Wait(wake_at=None, key="go"), T0) == RunStatus.PENDING
    assert any_store.get_run(run_id).status == RunStatus.PENDING


def test_finished_runs_accept_no_writes_or_events(any_store: Store) -> None:
    """Completed and failed runs are final: not due, no lease writes, no events."""
    done, failed = _new(any_store), _new(any_store)
    leases = {
        lease.run_id: lease
        for _, lease in any_store.claim_runs("w", limit=2, now=T0, expires_at=T0 + TTL)
    }
    any_store.complete(leases[done], {"result": 1}, T0)
    any_store.fail(leases[failed], ErrorInfo(type="E", message="boom"), T0)
    assert any_store.get_run(done).output == {"result": 1}
    assert any_store.get_run(failed).error == ErrorInfo(type="E", message="boom")
    for run_id in (done, failed):
        assert any_store.get_run(run_id).due_at is None
        with pytest.raises(LeaseLost):
            any_store.append_step(leases[run_id], _step(0))
        with pytest.raises(InvalidRunState):
            any_store.deliver_event(run_id, "k", None, T0)


def test_cancel_revokes_the_running_lease(any_store: Store) -> None:
    """Cancelling a running run ends it and locks its worker out of the journal."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    assert any_store.cancel(run_id, T0).status == RunStatus.CANCELLED
    with pytest.raises(LeaseLost):
        any_store.append_step(lease, _step(0))
    with pytest.raises(InvalidRunState):
        any_store.cancel(run_id, T0)
    assert any_store.claim_runs("w", limit=1, now=T0 + TTL * 9, expires_at=T0 + TTL * 10) == []


def test_cancel_a_waiting_run(any_store: Store) -> None:
    """A waiting run can be cancelled and then never becomes due."""
    run_id = _new(any_store)
    any_store.suspend(_claim_one(any_store), Wait(wake_at=T0 + TTL), T0)
    assert any_store.cancel(run_id, T0).status == RunStatus.CANCELLED
    assert any_store.next_due() is None
    assert any_store.claim_runs("w", limit=1, now=T0 + TTL * 2, expires_at=T0 + TTL * 3) == []


def test_resume_makes_a_failed_run_pending_with_its_journal(any_store: Store) -> None:
    """Resuming a failed run keeps its journal and clears its error; other states refuse."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    any_store.append_step(lease, _step(0, "kept"))
    any_store.fail(lease, ErrorInfo(type="E", message="m"), T0)
    run = any_store.resume(run_id, T0)
    assert (run.status, run.error) == (RunStatus.PENDING, None)
    assert [s.output for s in any_store.load_journal(run_id)] == ["kept"]
    with pytest.raises(InvalidRunState):
        any_store.resume(run_id, T0)


def test_release_makes_the_run_claimable_at_once(any_store: Store) -> None:
    """A released run is pending and the next claim gets it without waiting for expiry."""
    run_id = _new(any_store)
    lease = _claim_one(any_store, "w1")
    any_store.release(lease, T0)
    assert any_store.get_run(run_id).status == RunStatus.PENDING
    assert _claim_one(any_store, "w2").fence == lease.fence + 1


def test_a_run_released_until_later_is_claimable_from_then_on(any_store: Store) -> None:
    """A run released with a due time is pending, unclaimed before that time and claimed at it."""
    run_id = _new(any_store)
    lease = _claim_one(any_store, "w1")
    later = T0 + timedelta(seconds=1)
    any_store.release(lease, T0, due_at=later)
    assert any_store.get_run(run_id).status == RunStatus.PENDING
    assert any_store.claim_runs("w2", limit=1, now=T0, expires_at=T0 + TTL) == []
    assert _claim_one(any_store, "w2", now=later).fence == lease.fence + 1


def test_concurrent_claimers_never_share_a_run(any_store: Store) -> None:
    """Eight threads claiming at once get every run exactly once."""
    ids = {_new(any_store) for _ in range(40)}
    got: list[RunId] = []
    lock = threading.Lock()

    def claim(owner: str) -> None:
        while claimed := any_store.claim_runs(owner, limit=3, now=T0, expires_at=T0 + TTL):
            with lock:
                got.extend(run.id for run, _ in claimed)

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(got) == sorted(ids)


def test_fork_starts_with_the_inherited_journal(any_store: Store) -> None:
    """A fork is created with its inherited entries in one go and is listed under its source."""
    source = _new(any_store, {"task": "t"})
    lease = _claim_one(any_store)
    recorded = [_step(0, {"a": 1}), _step(1, None), _step(2, [1, "two"])]
    for step in recorded:
        any_store.append_step(lease, step)
    fork = Fork(source=source, at=2, steps=tuple(recorded[:2]))
    forked = any_store.create_run(new_run_id(), "wf", {"task": "t"}, T0, fork=fork)
    assert (forked.forked_from, forked.fork_at, forked.status) == (source, 2, RunStatus.PENDING)
    assert any_store.load_journal(forked.id) == recorded[:2]
    assert any_store.get_run(forked.id).forked_from == source
    assert [r.id for r in any_store.list_runs(forked_from=source)] == [forked.id]
    assert any_store.get_run(source).forked_from is None


def test_fork_of_an_unknown_run_creates_nothing(any_store: Store) -> None:
    """Forking a run that does not exist raises RunNotFound and leaves no run behind."""
    before = len(any_store.list_runs())
    fork = Fork(source=new_run_id(), at=0, steps=(_step(0),))
    with pytest.raises(RunNotFound):
        any_store.create_run(new_run_id(), "wf", None, T0, fork=fork)
    assert len(any_store.list_runs()) == before


def test_a_taken_run_id_is_refused_and_changes_nothing(any_store: Store) -> None:
    """Creating a run under an id that exists raises RunExists; the run keeps its state."""
    run_id = _new(any_store, {"first": True})
    lease = _claim_one(any_store)
    any_store.append_step(lease, _step(0))
    with pytest.raises(RunExists):
        any_store.create_run(run_id, "other", {"second": True}, T0 + TTL)
    run = any_store.get_run(run_id)
    assert (run.workflow, run.input, run.status) == ("wf", {"first": True}, RunStatus.RUNNING)
    assert [s.position for s in any_store.load_journal(run_id)] == [0]


def test_list_runs_filters_on_input_fields_and_pages(any_store: Store) -> None:
    """Runs are filtered on strings in their input at dotted paths, newest first, by page."""

    def started(user: Any, channel: str, minute: int) -> RunId:
        data = {"requester": {"user_id": user}, "context": {"slack": {"channel": channel}}}
        return _new(any_store, data, T0 + timedelta(minutes=minute))

    ann = [started("U_ANN", "C1", m) for m in range(3)]
    started("U_BOB", "C1", 3)
    started(7, "C2", 4)
    _new(any_store, "not a document", T0 + timedelta(minutes=5))
    mine = {"requester.user_id": "U_ANN"}
    assert [r.id for r in any_store.list_runs(input_fields=mine)] == ann[::-1]
    assert [r.id for r in any_store.list_runs(input_fields=mine, limit=2, after=ann[2])] == [
        ann[1],
        ann[0],
    ]
    both = {"requester.user_id": "U_ANN", "context.slack.channel": "C2"}
    assert any_store.list_runs(input_fields=both) == []
    assert any_store.list_runs(input_fields={"requester.user_id": "7"}) == []
    assert len(any_store.list_runs(input_fields={"context.slack.channel": "C1"})) == 4


def _queued(store: Store) -> list[str]:
    """The keys of the notices a store has queued, in any order."""
    if isinstance(store, InMemoryStore):
        outbox: Any = store.outbox
    else:
        assert isinstance(store, SqlStore)
        outbox = SqlOutbox(store.engine)
    due = outbox.claim_due("d", now=T0 + TTL, until=T0 + 2 * TTL, limit=100)
    return sorted(queued.notice.key for queued in due)


def _notice(key: str, run_id: RunId) -> Notice:
    return Notice(key=key, run_id=run_id, kind="run.reply", data={"text": key})


def test_an_entry_with_notices_is_written_with_them(any_store: Store) -> None:
    """An append that carries notices writes the entry and queues its notices together."""
    run_id = _new(any_store)
    lease = _claim_one(any_store)
    any_store.append_step(lease, _step(0, {"ok": 1}), [_notice("step-0", run_id)])
    assert [s.output for s in any_store.load_journal(run_id)] == [{"ok": 1}]
    assert _queued(any_store) == ["step-0"]


def test_an_end_with_notices_is_written_with_them(any_store: Store) -> None:
    """Completing and failing with notices end the run and queue the notices together."""
    done, failed = _new(any_store), _new(any_store)
    leases = {lease.run_id: lease for _, lease in _claim(any_store, 2)}
    boom = ErrorInfo(type="Boom", message="no")
    any_store.complete(leases[done], {"answer": 42}, T0, [_notice("done", done)])
    any_store.fail(leases[failed], boom, T0, [_notice("failed", failed)])
    assert any_store.get_run(done).output == {"answer": 42}
    assert any_store.get_run(failed).error == boom
    assert _queued(any_store) == ["done", "failed"]


def test_a_lost_lease_ends_nothing_and_queues_nothing(any_store: Store) -> None:
    """Completing under a stale fence raises LeaseLost, with or without notices."""
    run_id = _new(any_store)
    stale = _claim_one(any_store)
    any_store.cancel(run_id, T0)
    with pytest.raises(LeaseLost):
        any_store.complete(stale, "late", T0, [_notice("late", run_id)])
    with pytest.raises(LeaseLost):
        any_store.complete(stale, "late", T0)
    assert any_store.get_run(run_id).status is RunStatus.CANCELLED
    assert _queued(any_store) == []


def _claim(store: Store, limit: int) -> list[tuple[Any, Lease]]:
    claimed = store.claim_runs("w1", limit=limit, now=T0, expires_at=T0 + TTL)
    assert len(claimed) == limit
    return claimed
