"""Clicks acknowledged while the database drops connections are decided, or the clicker is told.

Two real ``signoff serve`` processes on PostgreSQL; a thread terminates every one of their
database connections (``pg_terminate_backend``, what a failover or a proxy restart does)
every 0.4 s while Approve clicks arrive at both. The processes' own workers, dispatchers and
decision threads do the rest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text

from agent_runtime import ApprovalStatus
from bot.slack.blocks import APPROVE
from store import build_engine
from tests.integration.response_urls import ResponseUrls
from tests.integration.serve_cluster import (
    Cluster,
    acked,
)
from tests.integration.slack_harness import (
    APPROVER,
    TASK,
)
from tests.integration.slack_readers import run_id_of

pytestmark = pytest.mark.postgres

APP_NAME = "signoff-under-test"
"""The ``application_name`` of the serve processes' connections: the ones terminated."""
RUNS = 6
FAULT_EVERY_S = 0.4
TERMINATE = text(
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE datname = current_database() AND application_name = :name"
)


class Terminator:
    """Terminates the serve processes' connections every ``FAULT_EVERY_S`` until stopped."""

    def __init__(self, url: str) -> None:
        self._engine = build_engine(url)
        self._stop = threading.Event()
        self.rounds = 0
        self.killed = 0
        self._thread = threading.Thread(target=self._loop, name="terminator", daemon=True)

    def __enter__(self) -> Terminator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._engine.dispose()

    def _loop(self) -> None:
        while not self._stop.wait(FAULT_EVERY_S):
            with self._engine.begin() as conn:
                self.killed += len(conn.execute(TERMINATE, {"name": APP_NAME}).all())
            self.rounds += 1


@pytest.fixture
def responses() -> Iterator[ResponseUrls]:
    """Where the clicks' ``response_url``s lead."""
    with ResponseUrls() as receiver:
        yield receiver


def test_clicks_during_connection_drops_are_decided_or_their_clicker_is_told(
    cluster: Cluster,
    pg_url: str,
    responses: ResponseUrls,
) -> None:
    """Every acknowledged click is decided through reconnects; none is lost in silence."""
    world = cluster.world
    cluster.env["SIGNOFF_DATABASE_URL"] = f"{pg_url}?application_name={APP_NAME}"
    fronts = cluster.start("A", "B")
    run_ids = [run_id_of(acked(fronts[i % 2].command(TASK))) for i in range(RUNS)]
    refunds = [cluster.waiting_with_cards(run_id)["issue_refund"] for run_id in run_ids]

    with Terminator(pg_url) as faults:
        cluster.wait(lambda: faults.killed > 0, what="a terminated connection")
        for index, refund in enumerate(refunds):
            front = fronts[index % 2]
            body, _ = front.click_body(
                APPROVER, APPROVE, world.card(refund.id), response_url=responses.url(refund.id)
            )
            acked(front.post(body))
            time.sleep(FAULT_EVERY_S / 2)  # spread the clicks over the faults, by design

    def settled(approval_id: str) -> bool:
        decided = cluster.reader.approvals.get(approval_id).status != ApprovalStatus.PENDING
        return decided or bool(responses.texts(approval_id))

    cluster.wait(
        lambda: all(settled(r.id) for r in refunds), what="every click settled", timeout=60
    )
    lost = [
        r.id
        for r in refunds
        if cluster.reader.approvals.get(r.id).status != ApprovalStatus.APPROVED
    ]
    assert lost == [], f"clicks not decided: {lost}; told: " + repr(
        {r: responses.texts(r) for r in lost}
    )
    for front in fronts:
        front.assert_alive()
