"""`store.open`: the one entry point that returns every store the application needs."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

import store
from agent_runtime import new_run_id
from agent_runtime.audit import AuditDraft
from agent_runtime.audit_keys import AuditKey, AuditKeys
from tests.integration import wait_until

KEYS = AuditKeys((AuditKey("k1", b"s" * 32),))


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    """A SQLite file's URL, then the session's PostgreSQL database."""
    found: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
    return found


def test_every_store_shares_the_one_engine(url: str) -> None:
    """Each store `store.open` returns works over the engine it returns, and no other."""
    stores = store.open(url)
    try:
        held = (stores.runs, stores.approvals, stores.outbox, stores.api, stores.replays)
        assert all(part.engine is stores.engine for part in (*held, stores.installations))
        assert stores.schema_is_current()
    finally:
        stores.close()


def test_without_migrating_an_empty_database_reports_its_schema_missing(sqlite_url: str) -> None:
    """`migrate=False` leaves a new database empty, says so, and `upgrade` brings it to head."""
    stores = store.open(sqlite_url, migrate=False)
    try:
        empty = stores.schema()
        assert (empty.current, empty.up_to_date) == (None, False)
        assert not stores.schema_is_current()
        stores.upgrade()
        assert stores.schema() == store.SchemaStatus(
            current=store.latest_revision(), latest=store.latest_revision()
        )
        assert stores.schema_is_current()
    finally:
        stores.close()


def test_audit_keys_sign_what_the_approval_store_appends(url: str) -> None:
    """The audit keys given to `store.open` sign each entry the approval store chains."""
    stores = store.open(url, audit_keys=KEYS)
    try:
        draft = AuditDraft(at=datetime.now(UTC), approval_id="a1", run_id="r1", action="probe")
        entry = stores.approvals.append_audit(draft)
        assert entry.kid == "k1"
        assert entry.mac == KEYS.keys[0].mac(entry.seq, entry.hash)
    finally:
        stores.close()


def test_the_wake_listener_hears_a_run_made_runnable(sqlite_url: str) -> None:
    """A listener from `Stores.wake_listener` is called when a run is started in this process."""
    stores = store.open(sqlite_url)
    woken = threading.Event()
    try:
        with stores.wake_listener(woken.set):
            stores.runs.create_run(new_run_id(), "wf", None, datetime.now(UTC))
            wait_until(woken.is_set, timeout=30, what="the wake-up")
    finally:
        stores.close()
