"""Two real ``signoff serve`` processes on one PostgreSQL database, behind one fake Slack.

Each scenario starts instances A and B as subprocesses (``signoff serve``: waitress at
``/slack/events``, a worker, the scheduler's dispatch/approvals/wake jobs and the LISTEN
thread), each on its own free port, both on the session's PostgreSQL database, both talking
to ONE sandbox Slack Web API and ONE demo payment provider served by the test process. Slack
requests are signed and built by the in-process harness (``slack_harness``); nothing is driven
by hand: the processes' own workers and dispatchers do all the work. Every process is SIGKILLed
in a ``finally``.
"""

from __future__ import annotations

import signal
import threading
import uuid
from collections import Counter
from datetime import timedelta

from sqlalchemy import text

from agent_runtime import ApprovalStatus, RunId, RunStatus, SystemClock
from agent_runtime.records import Wait
from bot.slack.blocks import APPROVE, REJECT
from store import SqlStore, open_store
from store.wake import deliver
from tests.integration import wait_until
from tests.integration.serve_cluster import (
    ANSWER,
    TOOLS,
    Cluster,
    acked,
    approvals_of_reader,
    approve_in_turn,
    assert_completed_story,
    assert_each_card_updated_once,
    assert_posted_once,
    late_line,
    thread_shape,
)
from tests.integration.slack_harness import (
    APPROVER,
    SECOND_APPROVER,
    TASK,
)
from tests.integration.slack_readers import (
    run_id_of,
)
from tests.integration.slack_steps import (
    empty_postgres,
    race,
)

# -- the scenarios ----------------------------------------------------------------------------


def test_command_on_a_clicks_on_b_and_the_thread_holds_each_message_once_in_order(
    cluster: Cluster,
) -> None:
    """/agent on A, Approve clicks on B: the run completes; one update per card; ordered thread."""
    world = cluster.world
    a, b = cluster.start("A", "B")
    ack = acked(a.command(TASK))
    assert ack.json()["response_type"] == "ephemeral"
    run_id = run_id_of(ack)

    approve_in_turn(b, cluster, run_id)
    cluster.completed(run_id)

    decided = approvals_of_reader(cluster, run_id)
    assert all(
        d.decided_by is not None and d.decided_by.user_id == APPROVER for d in decided.values()
    )
    root = world.root_of(run_id)
    assert root.text.splitlines()[0] == f"<@U_REQ> started a run of demo: {TASK}"
    assert_completed_story(thread_shape(world, run_id))
    replies = world.replies(run_id)
    assert [m.ts for m in replies] == sorted(m.ts for m in replies)
    assert all(m.ts > root.ts for m in replies)
    assert_each_card_updated_once(world, list(decided.values()))
    assert_posted_once(world)
    assert world.workspace.ephemerals() == []
    [charge] = world.provider.ledger.charges()
    assert (charge.order_id, charge.amount_cents) == ("1042", 4999)
    assert len(world.provider.ledger.emails()) == 1
    for process in (a, b):
        process.assert_alive()


def test_simultaneous_decisions_on_a_and_b_record_exactly_one_and_tell_the_loser(
    cluster: Cluster,
) -> None:
    """Approve/Approve and Approve/Reject races across A and B: one decision each, loser told."""
    world = cluster.world
    a, b = cluster.start("A", "B")
    run_ids = [run_id_of(acked(front.command(TASK))) for front in (a, b, a)]
    for run_id in run_ids:
        cluster.waiting_with_cards(run_id)

    for index, run_id in enumerate(run_ids):
        # alternate who clicks where, so each instance both wins and loses races
        dana_on, erin_on = (a, b) if index % 2 == 0 else (b, a)
        refund = approvals_of_reader(cluster, run_id)["issue_refund"]

        card = world.card(refund.id)
        seen = {user: len(world.ephemerals(user)) for user in world.approvers}
        acks = race(
            (dana_on, dana_on.click_body(APPROVER, APPROVE, card)[0]),
            (erin_on, erin_on.click_body(SECOND_APPROVER, APPROVE, card)[0]),
        )
        assert [acked(x).body for x in acks] == ["", ""]
        now = dana_on.decision(refund.id)
        assert now.status == ApprovalStatus.APPROVED
        assert now.decided_by is not None
        loser = SECOND_APPROVER if now.decided_by.user_id == APPROVER else APPROVER
        assert cluster.new_ephemerals(loser, seen[loser]) == [late_line("approved", now)]

        email = cluster.waiting_with_cards(run_id, TOOLS)["send_email"]
        card = world.card(email.id)
        acked(erin_on.click(SECOND_APPROVER, REJECT, card))
        modal = world.modal("approval.reject_submit", email.id)
        seen = {user: len(world.ephemerals(user)) for user in world.approvers}
        approve, reject = race(
            (dana_on, dana_on.click_body(APPROVER, APPROVE, card)[0]),
            (erin_on, erin_on.submit_body(SECOND_APPROVER, modal, "Not this week")),
        )
        assert acked(approve).body == ""
        now = dana_on.decision(email.id)
        if now.status == ApprovalStatus.REJECTED:
            assert acked(reject).body == "", "the rejection won: the modal closes"
            assert cluster.new_ephemerals(APPROVER, seen[APPROVER]) == [late_line("rejected", now)]
        else:
            assert now.status == ApprovalStatus.APPROVED
            assert acked(reject).json() == {
                "response_action": "errors",
                "errors": {"reason": late_line("approved", now)},
            }
        assert world.ephemerals(SECOND_APPROVER)[seen[SECOND_APPROVER] :] == [], (
            "a losing Reject is told in its modal, not by an ephemeral"
        )

    for run_id in run_ids:
        cluster.completed(run_id)
    decided = [x for run_id in run_ids for x in approvals_of_reader(cluster, run_id).values()]
    entries, _ = cluster.reader.approvals.store.audit_log()
    for approval in decided:
        actions = Counter(e.action for e in entries if e.approval_id == approval.id)
        assert actions["approve"] + actions["reject"] == 1, (approval.tool, actions)
        assert actions["late"] == 1, (approval.tool, actions)
    assert_each_card_updated_once(world, decided)
    assert_posted_once(world)
    charges = world.provider.ledger.charges()
    assert len(charges) == len(run_ids), "each run refunded exactly once"
    assert len({c.idempotency_key for c in charges}) == len(run_ids)


def test_a_run_waiting_on_a_killed_instance_completes_after_a_click_on_b(
    deployed_cluster: Cluster,
) -> None:
    """SIGKILL A while its run waits for approval; the clicks on B complete it on B's worker
    (both reaching the database directly, then through PgBouncer in session and in
    transaction mode)."""
    cluster = deployed_cluster
    world = cluster.world
    [a] = cluster.start("A")
    run_id = run_id_of(acked(a.command(TASK)))
    cluster.waiting_with_cards(run_id)  # A alone ran it up to the refund's approval
    [b] = cluster.start("B")
    a.sigkill()
    assert a.process.returncode == -signal.SIGKILL

    approve_in_turn(b, cluster, run_id)
    cluster.completed(run_id)

    b.assert_alive()
    assert world.reply_texts(run_id)[-1] == f"✅ *Done:* {ANSWER}"
    assert_completed_story(thread_shape(world, run_id))
    assert_each_card_updated_once(world, list(approvals_of_reader(cluster, run_id).values()))
    assert_posted_once(world)
    assert len(world.provider.ledger.charges()) == 1
    assert len(world.provider.ledger.emails()) == 1


# -- regression: the lost wake-up these scenarios found ----------------------------------------


def test_an_event_committed_while_its_run_suspends_wakes_the_run(pg_url: str) -> None:
    """An event whose transaction commits while its run suspends on that key still wakes it."""
    empty_postgres(pg_url)
    store = open_store(pg_url, migrate=False)
    clock = SystemClock()
    try:
        run_id = RunId(uuid.uuid4().hex)
        store.create_run(run_id, "demo.steps", {}, clock.now())
        [(_, lease)] = store.claim_runs(
            "worker-1", limit=1, now=clock.now(), expires_at=clock.now() + timedelta(seconds=30)
        )
        key = "approval:race"
        with store.engine.connect() as decider:
            # a decision delivers the event while the run still runs, not yet committed ...
            with decider.begin():
                deliver(decider, run_id, key, {"by": "dana"}, clock.now(), strict=False)
                decider_pid = decider.execute(text("SELECT pg_backend_pid()")).scalar_one()
                # ... the worker reaches wait_for(key) and suspends the run meanwhile (until
                # the suspend waits for the decision's lock, or has returned without) ...
                suspending = threading.Thread(
                    target=store.suspend, args=(lease, Wait(wake_at=None, key=key), clock.now())
                )
                suspending.start()
                wait_until(
                    lambda: not suspending.is_alive() or _blocked_by(store, decider_pid),
                    timeout=30,
                    what="the suspend to wait for the decision or return",
                )
            # ... and then the decision commits
            suspending.join(timeout=10)
        assert not suspending.is_alive()
        assert store.get_event(run_id, key) is not None
        run = store.get_run(run_id)
        assert run.status == RunStatus.PENDING, (
            f"the event is delivered but the run is {run.status.value}, waiting for {run.wait_key}"
        )
    finally:
        store.engine.dispose()


def _blocked_by(store: SqlStore, pid: int) -> bool:
    """Tell whether a session of the store's database waits for a lock ``pid`` holds."""
    with store.engine.connect() as conn:
        blocked = conn.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE :pid = ANY(pg_blocking_pids(pid))"),
            {"pid": pid},
        ).scalar_one()
    return bool(blocked)
