"""Decisions on PostgreSQL in a few round trips: the same outcome as one statement at a time.

Each scenario is carried out both ways, by ``decide_many`` (a statement at a time, as on
SQLite) and by ``decide_pipelined`` (``store.decision_pipeline``), and must leave the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

import psycopg
import pytest
from sqlalchemy import select, text, update

from agent_runtime import Actor, RunId, RunStatus
from agent_runtime.approvals import Approval, ApprovalStatus
from agent_runtime.exceptions import StoreUnavailable
from agent_runtime.notices import Notice
from agent_runtime.records import Event
from agent_runtime.store import Save
from store import SqlStore
from store.approval_saves import Decided, Deciding, decide_many
from store.approval_store import SqlApprovalStore
from store.decision_pipeline import DecisionStatements, decide_pipelined
from store.home_tabs import HOME_REFRESH, REFRESH_SPACING, SqlHomeTabs
from store.models import outbox
from store.notify import CHANNEL
from tests.contract.approvals import (
    KEYS,
    T0,
    approved,
    chains_sound,
    draft,
    pending,
)

Decide = Callable[[SqlStore, Sequence[Deciding]], list[Decided | BaseException]]


def one_at_a_time(sql: SqlStore, decisions: Sequence[Deciding]) -> list[Decided | BaseException]:
    """The batch through ``decide_many``, in a transaction of its own."""
    with sql.engine.begin() as conn:
        return decide_many(conn, KEYS, decisions)


def pipelined(sql: SqlStore, decisions: Sequence[Deciding]) -> list[Decided | BaseException]:
    """The batch through ``decide_pipelined``."""
    return decide_pipelined(sql.engine, DecisionStatements(sql.engine.dialect), KEYS, decisions)


@pytest.fixture(params=[one_at_a_time, pipelined], ids=["one at a time", "pipelined"])
def decide(request: pytest.FixtureRequest) -> Decide:
    """Each way of carrying out a batch of decisions on PostgreSQL."""
    way: Decide = request.param
    return way


def approving(*notices: Notice, key: str = "approval:x") -> Callable[[Approval], Save | None]:
    """A judge that approves a pending approval (waking its run on ``key``) with
    ``notices``, and leaves any other as it is."""

    def judge(current: Approval) -> Save | None:
        if current.status != ApprovalStatus.PENDING:
            return None
        decided = approved(current)
        wake = Event(key=key, data={"status": "approved"}, delivered_at=T0)
        return Save(decided, draft(decided, "approve"), T0, wake, notices)

    return judge


def queued(sql: SqlStore) -> dict[str, str]:
    """Every queued notice's kind, by key."""
    with sql.engine.connect() as conn:
        return {row.key: row.kind for row in conn.execute(select(outbox.c.key, outbox.c.kind))}


def test_a_batch_saves_queues_wakes_and_chains_each_decision(
    pg_store: SqlStore, pg_url: str, decide: Decide
) -> None:
    """Each decision of a batch is saved, its notices queued, its event stored, its run
    woken (with a wake-up sent at the commit) and its entry chained."""
    approvals = SqlApprovalStore(pg_store.engine, audit_keys=KEYS)
    batch = pending(pg_store, approvals, 5)
    listener = psycopg.connect(pg_url.replace("postgresql+psycopg", "postgresql"), autocommit=True)
    listener.execute(f"LISTEN {CHANNEL}")
    notices = [
        [Notice(key=f"card:{a.id}", run_id=a.run_id, kind="card", data={"text": "<b>&"})]
        for a in batch
    ]
    outcomes = decide(
        pg_store, [Deciding(a.id, approving(*n)) for a, n in zip(batch, notices, strict=True)]
    )
    assert all(not isinstance(o, BaseException) and o[1] is not None for o in outcomes)
    for approval in batch:
        stored = approvals.get_approval(approval.id)
        assert (stored.status, stored.version) == (ApprovalStatus.APPROVED, 1)
        assert pg_store.get_run(RunId(approval.run_id)).status == RunStatus.PENDING
        event = pg_store.get_event(RunId(approval.run_id), "approval:x")
        assert event is not None
        assert event.data == {"status": "approved"}
    assert {f"card:{a.id}" for a in batch} <= queued(pg_store).keys()
    entries, _ = approvals.audit_log()
    assert sorted(e.approval_id for e in entries if e.action == "approve") == sorted(
        a.id for a in batch
    )
    chains_sound(approvals)
    assert next(listener.notifies(timeout=30, stop_after=1)).channel == CHANNEL
    listener.close()


def test_two_votes_on_one_approval_in_a_batch_both_count(
    pg_store: SqlStore, decide: Decide
) -> None:
    """Two approvers of an approval that needs both, in one batch: the second is judged on
    the first's vote, both count, and both entries are chained."""
    approvals = SqlApprovalStore(pg_store.engine, audit_keys=KEYS)
    (approval,) = pending(pg_store, approvals, 1)

    def vote(user: str) -> Callable[[Approval], Save | None]:
        def judge(current: Approval) -> Save:
            votes = (*current.approvals, {"user_id": user})
            changed = replace(current, approvals=votes)
            if len(votes) == 2:
                changed = replace(approved(current), approvals=votes)
            return Save(changed, draft(changed, f"vote:{user}"), T0, None, ())

        return judge

    decide(pg_store, [Deciding(approval.id, vote("U_A")), Deciding(approval.id, vote("U_B"))])
    stored = approvals.get_approval(approval.id)
    assert stored.status == ApprovalStatus.APPROVED
    assert [vote["user_id"] for vote in stored.approvals] == ["U_A", "U_B"]
    assert stored.version == 2
    actions = [e.action for e in approvals.audit_log()[0]]
    assert actions == ["requested", "vote:U_A", "vote:U_B"]
    chains_sound(approvals)


def test_a_finished_run_gets_no_event_and_a_delivered_key_is_kept(
    pg_store: SqlStore, decide: Decide
) -> None:
    """A decision whose run has finished is saved without an event; one whose event key
    was delivered before keeps the first event, and its run is not woken again."""
    approvals = SqlApprovalStore(pg_store.engine, audit_keys=KEYS)
    finished, delivered = pending(pg_store, approvals, 2)
    pg_store.cancel(RunId(finished.run_id), T0)
    pg_store.deliver_event(RunId(delivered.run_id), "approval:y", {"first": True}, T0)
    outcomes = decide(
        pg_store,
        [
            Deciding(finished.id, approving()),
            Deciding(delivered.id, approving(key="approval:y")),
        ],
    )
    assert all(not isinstance(o, BaseException) for o in outcomes)
    assert approvals.get_approval(finished.id).status == ApprovalStatus.APPROVED
    assert pg_store.get_event(RunId(finished.run_id), "approval:x") is None
    assert pg_store.get_run(RunId(finished.run_id)).status == RunStatus.CANCELLED
    kept = pg_store.get_event(RunId(delivered.run_id), "approval:y")
    assert kept is not None
    assert kept.data == {"first": True}
    chains_sound(approvals)


def refresh(actor: Actor) -> Notice:
    """A Home tab refresh for ``actor``."""
    return Notice(
        key=f"home:{actor.user_id}",
        run_id=None,
        kind=HOME_REFRESH,
        data={"user": actor.to_json()},
        team_id="T1",
    )


def refreshes(sql: SqlStore) -> dict[str, tuple[datetime, bool]]:
    """Each queued Home tab refresh's due time, and whether its send has begun, by key."""
    with sql.engine.connect() as conn:
        rows = conn.execute(
            select(outbox.c.key, outbox.c.next_at, outbox.c.sending_at).where(
                outbox.c.kind == HOME_REFRESH
            )
        )
        return {row.key: (row.next_at, row.sending_at is not None) for row in rows}


def test_a_refresh_is_queued_only_for_a_person_who_opened_their_tab(
    pg_store: SqlStore, decide: Decide
) -> None:
    """A decision's Home tab refreshes are kept for the people who opened their tab (one
    numbered notice each), and dropped for the others."""
    approvals = SqlApprovalStore(pg_store.engine, audit_keys=KEYS)
    (approval,) = pending(pg_store, approvals, 1)
    dana, omar = Actor(user_id="U_DANA", team_id="T1"), Actor(user_id="U_OMAR", team_id="T1")
    SqlHomeTabs(pg_store.engine).opened(dana, [], T0)
    decide(pg_store, [Deciding(approval.id, approving(refresh(dana), refresh(omar)))])
    assert list(refreshes(pg_store)) == ["home:U_DANA:1"]


def test_a_waiting_refresh_shows_the_next_decision_and_a_begun_one_is_followed(
    pg_store: SqlStore, decide: Decide
) -> None:
    """While a person's refresh waits unsent, later decisions queue none (it will show
    them); once its send has begun, the next decision queues the next refresh, spaced
    after it."""
    approvals = SqlApprovalStore(pg_store.engine, audit_keys=KEYS)
    first, second, third = pending(pg_store, approvals, 3)
    dana = Actor(user_id="U_DANA", team_id="T1")
    SqlHomeTabs(pg_store.engine).opened(dana, [], T0)
    decide(pg_store, [Deciding(first.id, approving(refresh(dana)))])
    decide(pg_store, [Deciding(second.id, approving(refresh(dana)))])
    assert refreshes(pg_store) == {"home:U_DANA:1": (T0, False)}
    with pg_store.engine.begin() as conn:
        conn.execute(update(outbox).where(outbox.c.key == "home:U_DANA:1").values(sending_at=T0))
    decide(pg_store, [Deciding(third.id, approving(refresh(dana)))])
    assert refreshes(pg_store) == {
        "home:U_DANA:1": (T0, True),
        "home:U_DANA:2": (T0 + REFRESH_SPACING, False),
    }


def test_a_decision_the_database_refuses_fails_its_batch_and_nothing_of_it_stays(
    pg_store: SqlStore, decide: Decide
) -> None:
    """A batch with a notice the database refuses (its key too long) fails as a whole,
    saving none of its decisions, and the connection serves the next batch."""
    approvals = SqlApprovalStore(pg_store.engine, audit_keys=KEYS)
    good, bad = pending(pg_store, approvals, 2)
    broken = Notice(key="k" * 300, run_id=bad.run_id, kind="reply")
    with pytest.raises(Exception, match="too long"):
        decide(pg_store, [Deciding(good.id, approving()), Deciding(bad.id, approving(broken))])
    assert approvals.get_approval(good.id).status == ApprovalStatus.PENDING
    assert pg_store.get_run(RunId(good.run_id)).status == RunStatus.WAITING
    decide(pg_store, [Deciding(good.id, approving())])
    assert approvals.get_approval(good.id).status == ApprovalStatus.APPROVED
    chains_sound(approvals)


def test_the_store_decides_each_alone_when_the_database_refuses_its_batch(
    pg_store: SqlStore,
) -> None:
    """Through the store on PostgreSQL, a refused batch is decided again one decision at a
    time: only the refused decision's caller gets the error."""
    approvals = SqlApprovalStore(pg_store.engine, audit_keys=KEYS)
    good, bad, other = pending(pg_store, approvals, 3)
    broken = Notice(key="k" * 300, run_id=bad.run_id, kind="reply")
    outcomes = approvals.decide_approvals(
        [
            Deciding(good.id, approving()),
            Deciding(bad.id, approving(broken)),
            Deciding(other.id, approving()),
        ]
    )
    assert isinstance(outcomes[1], Exception)
    assert not isinstance(outcomes[0], BaseException)
    assert not isinstance(outcomes[2], BaseException)
    assert approvals.get_approval(bad.id).status == ApprovalStatus.PENDING
    assert approvals.get_approval(other.id).status == ApprovalStatus.APPROVED
    chains_sound(approvals)


def test_a_connection_cut_mid_batch_is_a_store_outage_and_is_not_reused(
    pg_store: SqlStore,
) -> None:
    """A batch whose connection the server terminates is refused as the store being
    unavailable, saves nothing, and the next batch runs on a new connection."""
    approvals = SqlApprovalStore(pg_store.engine, audit_keys=KEYS)
    cut, later = pending(pg_store, approvals, 2)

    def terminating(current: Approval) -> Save | None:
        with pg_store.engine.connect() as other:
            other.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE pid <> pg_backend_pid() AND datname = current_database()"
                    " AND state = 'idle in transaction'"
                )
            )
        return approving()(current)

    with pytest.raises(StoreUnavailable):
        approvals.decide_approvals([Deciding(cut.id, terminating)])
    assert approvals.get_approval(cut.id).status == ApprovalStatus.PENDING
    approvals.decide_approvals([Deciding(later.id, approving())])
    assert approvals.get_approval(later.id).status == ApprovalStatus.APPROVED
