"""The step benchmark's raw baselines write what they are compared for: a run row, one row
per step with the step's JSON, the run's end; through libpq's own call as through psycopg."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import make_url

from bench._common import fresh_name
from bench.raw import Driver, raw_pg_runs
from bench.workloads import step_output_json


@pytest.mark.parametrize("driver", ["libpq", "psycopg"])
def test_a_raw_run_writes_its_run_its_steps_and_its_end(pg_server_url: str, driver: Driver) -> None:
    """A raw run of five steps leaves one completed run and its five outputs, in order, by
    whichever driver sent them, alone or each in BEGIN/COMMIT."""
    dsn = make_url(pg_server_url).set(drivername="postgresql").render_as_string(False)
    outputs = [step_output_json(index) for index in range(5)]
    schema = fresh_name("bench_raw_test")
    with raw_pg_runs(dsn, driver, schema=schema) as runs:
        assert runs.run_step_seconds(outputs) > 0
        assert runs.run_step_seconds(outputs, transactions=True) > 0
        assert _written(dsn, schema) == [("completed", outputs), ("completed", outputs)]


def _written(dsn: str, schema: str) -> list[tuple[str, list[str]]]:
    """Each raw run's status and its steps' outputs in ``schema``, in position order."""
    with psycopg.connect(dsn, options=f"-csearch_path={schema}") as conn:
        ended = conn.execute("SELECT id, status FROM raw_runs").fetchall()
        return [
            (
                status,
                [
                    output
                    for (output,) in conn.execute(
                        "SELECT output FROM raw_run_steps WHERE run_id = %s ORDER BY position",
                        (run_id,),
                    )
                ],
            )
            for run_id, status in ended
        ]


def test_a_busy_raw_run_spends_its_busy_time_at_every_step_and_writes_the_same(
    pg_server_url: str,
) -> None:
    """A raw run told to keep the client busy between its statements takes at least that
    long a step, and still writes its run, its steps in order and its end."""
    dsn = make_url(pg_server_url).set(drivername="postgresql").render_as_string(False)
    outputs = [step_output_json(index) for index in range(5)]
    schema = fresh_name("bench_raw_test")
    with raw_pg_runs(dsn, "libpq", schema=schema) as runs:
        assert runs.run_step_seconds(outputs, busy=0.01) >= 0.01
        assert _written(dsn, schema) == [("completed", outputs)]
