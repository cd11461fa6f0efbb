"""The wake-up benchmark's processes run the runs it starts (it measures nothing otherwise)."""

from __future__ import annotations

from sqlalchemy import make_url

from bench.step_harness import pg_store
from bench.wakeups import Process, first_step_ms, running


def test_a_benchmarked_worker_process_runs_the_demo_run_it_is_timed_on(
    pg_server_url: str,
) -> None:
    """A ``signoff worker`` started as the benchmark starts it takes the ``demo.*`` run and
    writes its first step, so the timing is read from a real journal entry."""
    admin = make_url(pg_server_url).set(drivername="postgresql")
    with (
        pg_store(admin.render_as_string(hide_password=False)) as store,
        running(Process(store, "worker")),
    ):
        timing = first_step_ms(store)
    assert timing.total > 0
