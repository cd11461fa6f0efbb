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
        "sqlite_store" if request.param == "sqlite" else "pg_store")
    with store.engine.begin() as conn:
        from sqlalchemy import text

        conn.execute(text("DELETE FROM outbox"))
    return SqlOutbox(store.engine)


def _notice(key: str, run: str | None = "r1") -> Notice:
    return Notice(key=key, run_id=run, kind="run.reply", data={"text": key, "n": [1, "é"]})


def _claim(outbox: Outbox, now: datetime = T0, limit: int = 10) -> list[str]:
    return [q.notice.key for q in outbox.claim_due("d1", now=now, until=now + timedelta(
        seconds=30), limit=limit)]


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
    outbox.delivered(first[0].id, Delivery(channel="C1", ts="1.1"), T0)
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
    outbox.retry_later(item.id, T0 + timedelta(seconds=5), "slack: ratelimited")
    assert _claim(outbox, now=T0 + timedelta(seconds=4)) == []
    (again,) = outbox.claim_due("d1", now=T0 + timedelta(seconds=5), until=LATER, limit=1)
    assert again.attempts == 2


def test_delivery_is_remembered(outbox: Outbox) -> None:
    """Where a notice landed is kept for later updates; undelivered keys have none."""
    outbox.enqueue([_notice("a"), _notice("b")], T0)
    (item,) = outbox.claim_due("d1", now=T0, until=LATER, limit=1)
    assert outbox.delivery_of("a") is None
    outbox.delivered(item.id, Delivery(channel="C1", ts="123.456"), T0)
    assert outbox.delivery_of("a") == Delivery(channel="C1", ts="123.456")
    assert outbox.delivery_of("b") is None
