"""Two real ``signoff serve`` processes ride out a database restart by themselves.

The test runs a PostgreSQL server of its own (``private_postgres``), stops it at once in the
middle of three runs (every connection gone, as in a crash or a failover) and starts it again.
Nothing is restarted but the database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from agent_runtime import ApprovalStatus, StoreUnavailable
from bot.slack.blocks import APPROVE
from tests.integration.private_postgres import PrivatePostgres, server_binaries
from tests.integration.response_urls import ResponseUrls
from tests.integration.serve_cluster import (
    acked,
    approvals_of_reader,
    approve_in_turn,
    assert_posted_once,
    open_cluster,
)
from tests.integration.slack_harness import (
    APPROVER,
    TASK,
)
from tests.integration.slack_readers import run_id_of

T = TypeVar("T")

pytestmark = pytest.mark.postgres


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server this test alone uses, and may stop and start."""
    binaries = server_binaries()
    if binaries is None:
        pytest.fail("no PostgreSQL server binaries under /usr/lib/postgresql")
    with PrivatePostgres(binaries) as server:
        yield server


def tolerant(probe: Callable[[], T]) -> Callable[[], T | None]:
    """``probe``, answering None while the test's own reads hit the restart."""

    def call() -> T | None:
        try:
            return probe()
        except StoreUnavailable:
            return None

    return call


def test_serve_processes_recover_from_a_database_restart_and_lose_nothing(
    tmp_path: Path, private_pg: PrivatePostgres
) -> None:
    """Database down mid-run: clicks are told to retry; once it is back every run completes
    with one charge and every message posted once, without restarting a process."""
    with open_cluster(tmp_path, private_pg.url) as cluster, ResponseUrls() as responses:
        world = cluster.world
        a, b = cluster.start("A", "B")
        run_ids = [run_id_of(acked(front.command(TASK))) for front in (a, b, a)]
        waiting = {run_id: cluster.waiting_with_cards(run_id) for run_id in run_ids}

        assert_posted_once(world)
        private_pg.stop()
        refund = waiting[run_ids[0]]["issue_refund"]
        body, _ = b.click_body(
            APPROVER, APPROVE, world.card(refund.id), response_url=responses.url("down")
        )
        acked(b.post(body))
        told = cluster.wait(lambda: responses.texts("down"), what="the clicker told")
        assert told == [
            "Sorry: Signoff could not reach its database, so nothing was "
            "recorded. Try again in a moment."
        ]
        private_pg.start()

        for front, run_id in zip((b, a, b), run_ids, strict=True):
            cluster.wait(
                tolerant(lambda r=run_id: cluster.status(r)),  # type: ignore[misc]
                what="the database back for the test",
            )
            approve_in_turn(front, cluster, run_id)
        for run_id in run_ids:
            cluster.completed(run_id)
        for run_id in run_ids:
            for approval in approvals_of_reader(cluster, run_id).values():
                decided = cluster.reader.approvals.get(approval.id)
                assert decided.status == ApprovalStatus.APPROVED
        assert_posted_once(world)
        assert len(world.provider.ledger.charges()) == len(run_ids)
        assert len(world.provider.ledger.emails()) == len(run_ids)
        a.assert_alive()
        b.assert_alive()
