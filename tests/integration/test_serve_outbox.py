"""Slack delivery by two real ``signoff serve`` processes on PostgreSQL, through trouble.

The harness of ``test_serve_instances``: instances A and B as subprocesses over one sandbox
Slack Web API served by the test process, whose switches make Slack unreachable (connection
refused), rate-limited (429 with ``Retry-After``), slow, or hold its answers. Durations are
shrunk with ``SIGNOFF_OUTBOX_*`` settings so each scenario takes seconds. Whatever happens,
every message is posted once, threads stay in order and cards end showing their decision.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text

from agent_runtime import RunId, RunStatus
from store import models
from tests.integration.serve_cluster import (
    TOOLS,
    UNTIL_WAITING,
    Cluster,
    ServeProcess,
    acked,
    approvals_of_reader,
    approve_in_turn,
    assert_completed_story,
    assert_each_card_updated_once,
    assert_posted_once,
    open_cluster,
    thread_shape,
)
from tests.integration.slack_harness import (
    TASK,
)
from tests.integration.slack_readers import run_id_of
from tests.integration.slack_steps import (
    empty_postgres,
)

pytestmark = pytest.mark.postgres

MAIN_MAX_ATTEMPTS = 12
"""How many attempts once made a notice dead, whatever the failure."""


@pytest.fixture
def cluster(tmp_path: Path, pg_url: str) -> Iterator[Cluster]:
    """An emptied database, the provider and the sandbox Slack; no serve process yet."""
    empty_postgres(pg_url)
    with open_cluster(tmp_path, pg_url) as built:
        try:
            yield built
        finally:
            built.world.workspace.release_answers("chat.postMessage")


def start(
    cluster: Cluster, *names: str, claim_s: float, backoff_cap_s: float = 1.0
) -> list[ServeProcess]:
    """Start serve processes with a claim of ``claim_s`` and backoff capped at ``backoff_cap_s``."""
    cluster.env.update(
        SIGNOFF_OUTBOX_CLAIM_SECONDS=str(claim_s),
        SIGNOFF_OUTBOX_BACKOFF_CAP_SECONDS=str(backoff_cap_s),
    )
    return cluster.start(*names)


def most_attempts(cluster: Cluster) -> int:
    """Return the most attempts any notice has had."""
    with cluster.reader.store.engine.connect() as conn:
        return int(conn.execute(select(func.max(models.outbox.c.attempts))).scalar() or 0)


def any_dead(cluster: Cluster) -> bool:
    """Tell whether any notice was given up."""
    with cluster.reader.store.engine.connect() as conn:
        return bool(
            conn.execute(select(func.count()).where(models.outbox.c.status == "dead")).scalar()
        )


def status_is(cluster: Cluster, run_id: RunId, *statuses: RunStatus) -> bool:
    """Tell whether the run is in one of ``statuses`` now."""
    return cluster.status(run_id) in statuses


def terminate_connections(database_url: str) -> int:
    """Cut every other connection to the database, as a failover or an admin would."""
    engine = create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            return len(
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).all()
            )
    finally:
        engine.dispose()


def test_a_slack_outage_loses_no_message_and_leaves_no_stale_card(cluster: Cluster) -> None:
    """Slack refused, then 429ing, while runs start and are decided: afterwards every message
    and card update is out, once, in order."""
    world = cluster.world
    a, b = start(cluster, "A", "B", claim_s=8)
    decided = run_id_of(acked(a.command(TASK)))
    cluster.waiting_with_cards(decided)
    acked(b.command("help"))  # Bolt checks its token with Slack on its first request

    world.slack.go_offline()
    started = [run_id_of(acked(front.command(TASK))) for front in (a, b)]
    approve_in_turn(b, cluster, decided, TOOLS[:1])
    cluster.wait(
        lambda: (
            "send_email" in approvals_of_reader(cluster, decided)
            and all(status_is(cluster, r, RunStatus.WAITING) for r in [decided, *started])
        ),
        what="runs moving offline (the refund done, the email asked)",
    )
    world.slack.go_online()
    world.workspace.rate_limit_for(600, retry_after=1)
    cluster.wait(
        lambda: most_attempts(cluster) > MAIN_MAX_ATTEMPTS or any_dead(cluster),
        what="a notice retried past the old attempt limit",
        timeout=60,
    )
    world.workspace.rate_limit_for(0)

    approve_in_turn(b, cluster, decided, TOOLS[1:])
    cluster.completed(decided)
    for run_id in started:
        cluster.waiting_with_cards(run_id)
    assert not any_dead(cluster)
    assert_completed_story(thread_shape(world, decided))
    for run_id in started:
        assert thread_shape(world, run_id) == UNTIL_WAITING
    for run_id in [decided, *started]:
        replies = world.replies(run_id)
        assert [m.ts for m in replies] == sorted(m.ts for m in replies)
    assert_each_card_updated_once(world, list(approvals_of_reader(cluster, decided).values()))
    assert_posted_once(world)
    assert [c.status for c in world.workspace.calls()].count(429) > 0


def test_slow_slack_never_gets_a_message_from_two_dispatchers(cluster: Cluster) -> None:
    """Slack answering each call late, so a round outlives its claim: each message posted once."""
    world = cluster.world
    a, b = start(cluster, "A", "B", claim_s=4)
    world.workspace.slow_down(0.6)
    run_ids = [run_id_of(acked(front.command(TASK))) for front in (a, b)]
    cluster.wait(
        lambda: (
            cluster.outbox_quiet()
            and all(status_is(cluster, r, RunStatus.WAITING) for r in run_ids)
        ),
        what="both runs waiting with their notices out",
        timeout=90,
    )
    world.workspace.slow_down(0)

    assert_posted_once(world)
    for run_id in run_ids:
        assert thread_shape(world, run_id) == UNTIL_WAITING
        for approval in approvals_of_reader(cluster, run_id).values():
            for user in world.approvers:
                world.card(approval.id, channel=world.dm(user)[0].channel)
    assert len(world.successful("chat.postMessage")) == len(run_ids) * (
        1 + len(UNTIL_WAITING) + len(world.approvers)  # root, thread, the refund's DMs
    )


def test_a_dropped_database_connection_after_slack_accepted_a_post_does_not_repeat_it(
    cluster: Cluster,
) -> None:
    """pg_terminate_backend between Slack accepting a post and its record: posted once."""
    world = cluster.world
    a, _ = start(cluster, "A", "B", claim_s=20)
    world.workspace.hold_answers("chat.postMessage")
    run_id = run_id_of(acked(a.command(TASK)))
    cluster.wait(lambda: world.roots(), what="the root message, its answer held")
    assert terminate_connections(world.database_url) > 0
    cluster.reader.store.engine.dispose()
    world.workspace.release_answers("chat.postMessage")

    cluster.waiting_with_cards(run_id)
    assert thread_shape(world, run_id) == UNTIL_WAITING
    assert_posted_once(world)


def test_a_post_whose_sender_died_before_recording_it_is_found_not_repeated(
    cluster: Cluster,
) -> None:
    """SIGKILL between Slack accepting a post and its record: the next process finds it."""
    world = cluster.world
    [a] = start(cluster, "A", claim_s=6)
    world.workspace.hold_answers("chat.postMessage")
    run_id = run_id_of(acked(a.command(TASK)))
    cluster.wait(lambda: world.roots(), what="the root message, its answer held")
    a.sigkill()
    world.workspace.release_answers("chat.postMessage")

    start(cluster, "B", claim_s=6)
    cluster.waiting_with_cards(run_id)
    assert thread_shape(world, run_id) == UNTIL_WAITING
    assert_posted_once(world)
    assert any(c.ok for c in world.workspace.calls("conversations.history"))
