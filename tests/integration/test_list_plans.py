"""Every list, and the claim, is served by an index in its own order: the plans PostgreSQL
chooses with thousands of finished and waiting runs (the ``bench.lists`` data, smaller).

Each list is called through the store as its command calls it; the statement it sent is
then explained with the same parameters. A sequential scan, or a sort of a list its index
already orders, would make the list's cost grow with every run ever made.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from bench._common import scratch_database
from bench.decisions import Bench, open_bench, pg_url
from bench.lists import explain, last_statement, lists, plan_nodes, seed
from store import open_store

pytestmark = pytest.mark.postgres

FINISHED, WAITING = 20_000, 2_000

RUNS_IN_ORDER = {"ix_runs_created_at_id", "ix_runs_status_created_at_id"}
EXPECTED = {
    "baseline: one run by id": {"pk_runs"},
    "signoff runs": {"ix_runs_created_at_id"},
    "signoff runs --status waiting": {"ix_runs_status_created_at_id"},
    "signoff runs --status completed, a deep page": RUNS_IN_ORDER,
    "/agent list (a channel's runs)": {"ix_runs_input_channel"},
    "/agent status (a requester's latest)": {"ix_runs_input_requester"},
    "signoff approvals --pending": {"ix_approvals_status_requested_at_position_id"},
    "/agent pending (approver of all)": {"ix_approvals_status_requested_at_position_id"},
    "/agent pending (approver of 20)": {"ix_approvals_policy_approvers"},
    "/agent pending (approver of none)": {"ix_approvals_policy_approvers"},
    "signoff show (a run's approvals)": {"ix_approvals_run_id"},
    "claim (nothing due)": {"ix_runs_due_at"},
}
"""The indexes each list may be read through (most completed runs are in both of the
first two: either serves the completed ones in order)."""

SORTED_AFTER_LOOKUP = {
    "/agent pending (approver of 20)",
    "/agent pending (approver of none)",
    "signoff show (a run's approvals)",
}
"""Lists whose few matching rows are found through an index, then put in order."""


@pytest.fixture(scope="module")
def seeded(pg_server_url: str) -> Iterator[Bench]:
    """A database of its own holding the benchmark's runs and approvals, analyzed."""
    admin = make_url(pg_server_url).set(drivername="postgresql")
    with scratch_database(admin.render_as_string(hide_password=False), "signoff_plans") as dsn:
        bench = open_bench(pg_url(dsn))
        try:
            seed(bench, dsn, FINISHED, WAITING)
            yield bench
        finally:
            _engine(bench).dispose()


def _engine(bench: Bench) -> Engine:
    engine: Engine = bench.runtime.store.engine  # type: ignore[attr-defined]
    return engine


def _plan(engine: Engine, statement: str, params: Any) -> dict[str, Any]:
    plan: dict[str, Any] = explain(engine, statement, params)["Plan"]
    return plan


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_list_reads_through_its_index(seeded: Bench, name: str) -> None:
    """The list's statement scans its own index, no table sequentially, and sorts only few."""
    engine = _engine(seeded)
    statement, params = last_statement(engine, lists(seeded, FINISHED)[name])
    nodes = list(plan_nodes(_plan(engine, statement, params)))
    kinds = {node["Node Type"] for node in nodes}
    assert "Seq Scan" not in kinds, nodes
    assert EXPECTED[name] & {node.get("Index Name") for node in nodes}, nodes
    assert ("Sort" in kinds) == (name in SORTED_AFTER_LOOKUP), nodes


def test_a_deep_page_starts_inside_the_index(seeded: Bench) -> None:
    """A page after a given run starts in the index: a condition on (created_at, id) there."""
    engine = _engine(seeded)
    call = lists(seeded, FINISHED)["signoff runs --status completed, a deep page"]
    statement, params = last_statement(engine, call)
    (scan,) = [n for n in plan_nodes(_plan(engine, statement, params)) if "Index Name" in n]
    assert scan["Index Name"] in RUNS_IN_ORDER, scan
    assert "ROW(created_at, id) <" in scan["Index Cond"], scan


@pytest.mark.parametrize("path", ["context.slack.channel", "requester.user_id"])
def test_sqlite_finds_a_channel_or_requester_through_its_index(path: str) -> None:
    """On SQLite too, the runs of a channel or of a requester are searched in their index."""
    with tempfile.TemporaryDirectory() as directory:
        store = open_store(f"sqlite:///{Path(directory) / 'plans.db'}")
        try:
            statement, params = last_statement(
                store.engine, lambda: store.list_runs(input_fields={path: "C7"}, limit=15)
            )
            with store.engine.connect() as conn:
                plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
        finally:
            store.engine.dispose()
    name = "channel" if path.startswith("context") else "requester"
    assert any(f"USING INDEX ix_runs_input_{name}" in str(row) for row in plan), plan
