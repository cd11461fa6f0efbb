"""SQLite: reading never waits for the write lock, so a long write does not hold up reads."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

from agent_runtime import RunId, new_run_id
from store import SqlStore
from store.approval_store import SqlApprovalStore
from tests.contract.approvals import an_approval, draft

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DEADLINE_S = 10.0
"""Far longer than a read takes, far shorter than SQLite's 30-second busy timeout."""


@contextmanager
def _write_lock_held(url: str) -> Iterator[None]:
    """Hold the database's write lock from another connection, as a long write would."""
    other = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def _finishes(read: Callable[[], object]) -> bool:
    """Run ``read`` on a thread; tell whether it finished before the deadline."""
    done = threading.Event()

    def target() -> None:
        read()
        done.set()

    threading.Thread(target=target, daemon=True).start()
    return done.wait(DEADLINE_S)


@pytest.fixture
def run_id(sqlite_store: SqlStore) -> RunId:
    """A run to read back."""
    return sqlite_store.create_run(new_run_id(), "flow", None, T0).id


def test_reads_do_not_take_the_write_lock(
    sqlite_store: SqlStore, sqlite_url: str, run_id: RunId
) -> None:
    """Runs, journals, approvals and the audit log read while another connection writes."""
    approvals = SqlApprovalStore(sqlite_store.engine)
    approval = an_approval(run_id)
    approvals.create_approval(approval, draft(approval, "requested"))
    reads: list[Callable[[], object]] = [
        lambda: approvals.get_approval(approval.id),
        lambda: sqlite_store.get_run(run_id),
        lambda: sqlite_store.list_runs(),
        lambda: sqlite_store.load_journal(run_id),
        lambda: sqlite_store.next_due(),
        lambda: approvals.list_approvals(),
        lambda: approvals.audit_log(),
    ]
    with _write_lock_held(sqlite_url):
        assert all(_finishes(read) for read in reads)
