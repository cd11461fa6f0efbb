"""A decision that resumes a run wakes every listening worker on PostgreSQL, once it commits."""

from __future__ import annotations

import threading

from agent_runtime.records import Event
from store import SqlStore
from store.approval_store import SqlApprovalStore
from store.notify import WakeListener
from tests.contract.approvals import T0, an_approval, approved, draft, waiting_run

WAIT_S = 10.0


def test_a_decision_that_resumes_its_run_sends_a_wake_up(pg_store: SqlStore) -> None:
    """The decision's delivery asks for the wake-up itself: a listener hears it after commit."""
    approvals = SqlApprovalStore(pg_store.engine)
    approval = an_approval(waiting_run(pg_store))
    approvals.create_approval(approval, draft(approval, "requested"))
    woken = threading.Event()
    with WakeListener(pg_store.engine, woken.set):
        assert woken.wait(WAIT_S), "the listener never started"  # it wakes once on listening
        woken.clear()
        assert approvals.save_approval(
            approved(approval),
            audit=draft(approval, "approve"),
            decided_before=T0,
            wake=Event(key="approval:x", data={"status": "approved"}, delivered_at=T0),
        )
        assert woken.wait(WAIT_S), "no wake-up after the decision"
