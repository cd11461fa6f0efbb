"""Tests of the refund workflow on the in-memory store, under a frozen clock."""

from datetime import timedelta

from agent_runtime import RunStatus, Runtime, WorkerOptions
from agent_runtime.testing import FrozenClock, InMemoryStore
from examples.approval_workflow import FOLLOW_UPS, REFUNDS, workflows


def test_the_refund_waits_for_approval_and_follows_up_a_day_later() -> None:
    """Nothing is refunded before the approval; the follow-up comes after the durable day."""
    clock = FrozenClock()
    runtime = Runtime(InMemoryStore(), workflows, clock=clock)
    worker = runtime.worker(WorkerOptions(owner="test", lease_ttl=timedelta(minutes=1)))
    run_id = runtime.start("refunds.issue", {"id": "1042"}).id
    worker.run_once()
    assert (runtime.get(run_id).wait_key, len(REFUNDS)) == ("approval", 0)
    runtime.signal(run_id, "approval", {"by": "dana"})
    worker.run_once()
    assert runtime.get(run_id).status == RunStatus.WAITING  # the one-day timer
    assert "1042" not in FOLLOW_UPS
    clock.advance(timedelta(days=1))
    worker.run_once()
    run = runtime.get(run_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output["approved_by"] == "dana"
    assert run.output["refund"] == {"order_id": "1042", "refunded_cents": 4999}
    assert FOLLOW_UPS.count("1042") == 1
