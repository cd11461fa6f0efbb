"""The step benchmark's floor sends the engine's own statements with the entries the
engine writes, so what it times is the database's share of a real run."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from sqlalchemy import make_url

from agent_runtime import RunStatus, StepRecord
from bench.step_harness import (
    ServingWorker,
    StatementFloor,
    TimedStore,
    engine_step_seconds,
    pg_store,
    sqlite_store,
)

STEPS = 5


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, pg_server_url: str) -> Iterator[TimedStore]:
    """A migrated benchmark store on each backend."""
    if request.param == "sqlite":
        with sqlite_store() as store:
            yield store
        return
    admin = make_url(pg_server_url).set(drivername="postgresql")
    with pg_store(admin.render_as_string(hide_password=False)) as store:
        yield store


def _entries(journal: list[StepRecord]) -> list[tuple[object, ...]]:
    return [(e.position, e.kind, e.name, e.input_hash, e.output, e.attempts) for e in journal]


def test_the_floor_writes_what_a_payload_run_of_the_engine_writes(store: TimedStore) -> None:
    """A floor run leaves the journal and the completed run a real ``bench.payload`` run
    leaves (timestamps aside): it sends the engine's statements, not cheaper ones."""
    with ServingWorker(store) as worker:  # serving, as in the benchmark: it takes no floor run
        engine_step_seconds(worker, store, STEPS)
        (engine_run,) = store.list_runs(limit=1)
        with contextlib.closing(StatementFloor(store)) as floor:
            assert floor.run_step_seconds(STEPS) > 0
    assert floor.last_run is not None
    floor_run = store.get_run(floor.last_run)
    assert floor_run.status is engine_run.status is RunStatus.COMPLETED
    assert floor_run.output == engine_run.output == {"steps": STEPS}
    expected = _entries(store.load_journal(engine_run.id))
    assert len(expected) == STEPS
    assert _entries(store.load_journal(floor_run.id)) == expected
