"""``signoff_lease_takeovers_total``: runs a worker took over from a lapsed lease."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client.parser import text_string_to_metric_families

from agent_runtime import RunStatus, Runtime, SystemClock, WorkerOptions, Workflows
from agent_runtime.testing import InMemoryStore
from bot.ops.metrics import Metrics


def _takeovers(metrics: Metrics) -> float:
    text = metrics.exposition().decode()
    [family] = [
        f for f in text_string_to_metric_families(text) if f.name == "signoff_lease_takeovers"
    ]
    [sample] = [s for s in family.samples if s.name == "signoff_lease_takeovers_total"]
    return sample.value


def test_a_run_taken_over_from_a_lapsed_lease_is_counted_once() -> None:
    """A worker claiming a run whose holder's lease lapsed counts one takeover; claiming new
    runs counts none."""
    store, workflows, metrics = InMemoryStore(), Workflows(), Metrics()
    workflows.add("one", lambda ctx, _: ctx.step(lambda: "done", name="only"))
    runtime = Runtime(store, workflows)
    lapsed, fresh = runtime.start("one"), runtime.start("one")
    now = SystemClock().now()
    lapsed_at = now - timedelta(seconds=1)
    [(held, _)] = store.claim_runs("dead-worker", limit=1, now=now, expires_at=lapsed_at)
    options = WorkerOptions(owner="live", on_takeover=metrics.took_over)

    assert _takeovers(metrics) == 0
    runtime.worker(options).run_once()

    assert {runtime.get(r.id).status for r in (lapsed, fresh)} == {RunStatus.COMPLETED}
    assert _takeovers(metrics) == 1
    assert held.id == lapsed.id


def test_every_claim_is_timed_whether_or_not_it_found_a_run() -> None:
    """``signoff_claim_duration_seconds`` counts one observation per claim, empty ones too."""
    store, workflows, metrics = InMemoryStore(), Workflows(), Metrics()
    workflows.add("one", lambda ctx, _: ctx.step(lambda: "done", name="only"))
    runtime = Runtime(store, workflows)
    worker = runtime.worker(WorkerOptions(owner="live", on_claim=metrics.claimed))
    worker.run_once()  # nothing due
    runtime.start("one")
    worker.run_once()
    text = metrics.exposition().decode()
    [family] = [
        f
        for f in text_string_to_metric_families(text)
        if f.name == "signoff_claim_duration_seconds"
    ]
    [count] = [s for s in family.samples if s.name == "signoff_claim_duration_seconds_count"]
    assert count.value >= 2
