"""The Outbox contract: in-memory, SQLite and PostgreSQL queue and claim notices alike."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_runtime.notices import Delivery, Notice, Outbox
from agent_runtime.testing import InMemoryOutbox
from store import SqlStore
from store.outbox import SqlOutbox

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(minutes=1)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def outbox(request: pytest.FixtureRequest) -> Outbox:
    """Each Outbox implementation in turn."""
    if request.param == "memory":
        return InMemoryOutbox()
    store: SqlStore = request.getfixturevalue(
        "sqlite_store" if request.param == "sqlite" else "pg_store"
    )
    with store.engine.begin() as conn:
        from sqlalchemy import text

        conn.execute(text("DELETE FROM outbox"))
    return SqlOutbox(store.engine)


def _notice(key: str, run: str | None = "r1") -> Notice:
    return Notice(key=key, run_id=run, kind="run.reply", data={"text": key, "n": [1, "é"]})


def _claim(outbox: Outbox, now: datetime = T0, limit: int = 10) -> list[str]:
    return [
        q.notice.key
        for q in outbox.claim_due("d1", now=now, until=now + timedelta(seconds=30), limit=limit)
    ]


def test_a_key_is_queued_once(outbox: Outbox) -> None:
    """Queuing the same key twice keeps one notice, with its first data."""
    outbox.enqueue([_notice("a")], T0)
    outbox.enqueue([Notice(key="a", run_id="r1", kind="other", data={})], T0)
    (item,) = outbox.claim_due("d1", now=T0, until=LATER, limit=10)
    assert (item.notice.kind, item.notice.data) == ("run.reply", {"text": "a", "n": [1, "é"]})


def test_one_run_is_delivered_in_order(outbox: Outbox) -> None:
    """A run's later notice is not claimable until its earlier one is delivered."""
    outbox.enqueue([_notice("a"), _notice("b"), _notice("x", run="r2"), _notice("e", None)], T0)
    first = outbox.claim_due("d1", now=T0, until=LATER, limit=10)
    assert [q.notice.key for q in first] == ["a", "x", "e"]
    assert _claim(outbox) == []
    outbox.delivered(first[0], Delivery(channel="C1", ts="1.1"), T0)
    assert _claim(outbox) == ["b"]


def test_claimed_notices_are_not_claimed_again_until_the_claim_expires(outbox: Outbox) -> None:
    """A claim keeps other dispatchers off a notice until it expires."""
    outbox.enqueue([_notice("a")], T0)
    assert _claim(outbox) == ["a"]
    assert _claim(outbox) == []
    assert _claim(outbox, now=T0 + timedelta(seconds=31)) == ["a"]


def test_retry_later_waits_and_counts_attempts(outbox: Outbox) -> None:
    """A notice given back for later is due again only at that time, with its attempts counted."""
    outbox.enqueue([_notice("a")], T0)
    (item,) = outbox.claim_due("d1", now=T0, until=LATER, limit=1)
    outbox.retry_later(item, T0 + timedelta(seconds=5), "slack: ratelimited")
    assert _claim(outbox, now=T0 + timedelta(seconds=4)) == []
    (again,) = outbox.claim_due("d1", now=T0 + timedelta(seconds=5), until=LATER, limit=1)
    assert again.attempts == 2


def test_delivery_is_remembered(outbox: Outbox) -> None:
    """Where a notice landed is kept for later updates; undelivered keys have none."""
    outbox.enqueue([_notice("a"), _notice("b")], T0)
    (item,) = outbox.claim_due("d1", now=T0, until=LATER, limit=1)
    assert outbox.delivery_of("a") is None
    outbox.delivered(item, Delivery(channel="C1", ts="123.456"), T0)
    assert outbox.delivery_of("a") == Delivery(channel="C1", ts="123.456")
    assert outbox.delivery_of("b") is None


def test_retrying_never_exhausts_a_notice(outbox: Outbox) -> None:
    """However many times a notice is given back for later, it stays due and claimable."""
    outbox.enqueue([_notice("a"), _notice("b")], T0)
    now = T0
    for _ in range(40):
        (item,) = outbox.claim_due("d1", now=now, until=now + timedelta(seconds=30), limit=10)
        assert item.notice.key == "a"
        assert outbox.retry_later(item, now + timedelta(seconds=1), "slack: ratelimited")
        now += timedelta(seconds=1)
    assert not outbox.is_dead("a")
    assert outbox.dead_notices(10) == []
    assert _claim(outbox, now=now) == ["a"]


def test_a_lost_claim_can_neither_send_nor_record(outbox: Outbox) -> None:
    """Once another dispatcher claims a notice, the first one's calls change nothing."""
    outbox.enqueue([_notice("a")], T0)
    (stale,) = outbox.claim_due("d1", now=T0, until=T0 + timedelta(seconds=30), limit=1)
    later = T0 + timedelta(seconds=31)
    (fresh,) = outbox.claim_due("d2", now=later, until=later + timedelta(seconds=30), limit=1)
    assert fresh.fence > stale.fence
    assert not outbox.begin_send(stale, now=later, until=later + timedelta(seconds=30))
    assert not outbox.delivered(stale, Delivery(channel="C1", ts="1.1"), later)
    assert not outbox.retry_later(stale, later, "late")
    assert not outbox.give_up(stale, "late")
    assert outbox.delivery_of("a") is None
    assert outbox.begin_send(fresh, now=later, until=later + timedelta(seconds=30))
    assert outbox.delivered(fresh, Delivery(channel="C1", ts="2.2"), later)
    assert outbox.delivery_of("a") == Delivery(channel="C1", ts="2.2")
    assert not outbox.delivered(fresh, Delivery(channel="C1", ts="3.3"), later)


def test_beginning_a_send_extends_the_claim(outbox: Outbox) -> None:
    """A send that begins near the end of a claim holds the notice for a full claim again."""
    outbox.enqueue([_notice("a")], T0)
    (item,) = outbox.claim_due("d1", now=T0, until=T0 + timedelta(seconds=30), limit=1)
    begun = T0 + timedelta(seconds=29)
    assert outbox.begin_send(item, now=begun, until=begun + timedelta(seconds=30))
    assert _claim(outbox, now=T0 + timedelta(seconds=58)) == []
    assert _claim(outbox, now=T0 + timedelta(seconds=59)) == ["a"]


def test_a_send_whose_outcome_was_not_recorded_is_uncertain(outbox: Outbox) -> None:
    """A claim after a begun, unrecorded send says so, with when that send began."""
    outbox.enqueue([_notice("a"), _notice("b", run="r2")], T0)
    first = outbox.claim_due("d1", now=T0, until=T0 + timedelta(seconds=30), limit=2)
    assert [q.uncertain for q in first] == [False, False]
    begun = T0 + timedelta(seconds=1)
    assert outbox.begin_send(first[0], now=begun, until=begun + timedelta(seconds=30))
    assert outbox.begin_send(first[1], now=begun, until=begun + timedelta(seconds=30))
    assert outbox.retry_later(first[1], begun, "slack: ratelimited")
    later = T0 + timedelta(minutes=2)
    again = outbox.claim_due("d2", now=later, until=later + timedelta(seconds=30), limit=2)
    assert [(q.notice.key, q.uncertain) for q in again] == [("a", True), ("b", False)]
    assert again[0].sending_since == begun
    assert outbox.begin_send(again[0], now=later, until=later + timedelta(seconds=30))
    assert outbox.retry_later(again[0], later, "timed out", maybe_sent=True)
    (third,) = outbox.claim_due("d3", now=later, until=later + timedelta(seconds=30), limit=1)
    assert (third.notice.key, third.uncertain, third.sending_since) == ("a", True, begun)


def test_a_notice_given_up_is_dead_and_listed(outbox: Outbox) -> None:
    """Giving up keeps the notice, with why, and lets its run's next notice through."""
    outbox.enqueue([_notice("a"), _notice("b")], T0)
    (item,) = outbox.claim_due("d1", now=T0, until=LATER, limit=10)
    assert outbox.give_up(item, "slack: channel_not_found")
    assert outbox.is_dead("a")
    assert not outbox.is_dead("b")
    [dead] = outbox.dead_notices(10)
    assert (dead.key, dead.run_id, dead.error) == ("a", "r1", "slack: channel_not_found")
    assert _claim(outbox) == ["b"]
