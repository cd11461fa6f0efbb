"""A gateway's run: adopted by id across gateway deaths, fenced, parked by any worker, and
projected to Slack like a native run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from agent_runtime import (
    Actor,
    ApprovalPolicy,
    Decision,
    LeaseLost,
    RunStatus,
    StepKind,
    StepRecord,
    SystemClock,
)
from bot.app.settings import Settings
from bot.app.wiring import build_services
from bot.mcp.parking import DETACHED, WORKFLOW
from bot.mcp.session_run import SessionKey, attach
from bot.mcp.signoffs import CallRequest, SignOffs
from bot.slack.notifier import ROOT_UPDATE, card_key, root_key
from store import SqlStore
from store.models import outbox

KEY = SessionKey(gateway="notes", client="U_AGENT")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
TTL = timedelta(seconds=30)


def _entry(position: int) -> StepRecord:
    return StepRecord(
        position=position,
        kind=StepKind.STEP,
        name="mcp.call:x",
        input_hash="0",
        output={},
        started_at=T0,
        finished_at=T0,
    )


@pytest.fixture(params=["sqlite_store", "pg_store"])
def store(request: pytest.FixtureRequest) -> SqlStore:
    """Each SQL store in turn."""
    found: SqlStore = request.getfixturevalue(request.param)
    return found


def test_adopt_run_waits_for_a_live_lease_and_fences_the_old_holder(store: SqlStore) -> None:
    """A run is adopted by id only when no live lease holds it; the old holder can no longer
    write, and a finished run is never adopted."""
    store.create_run(KEY.run_id, WORKFLOW, KEY.to_json(), T0)
    first = store.adopt_run(KEY.run_id, "gateway-1", now=T0, expires_at=T0 + TTL)
    assert first is not None
    assert store.adopt_run(KEY.run_id, "gateway-2", now=T0 + TTL / 2, expires_at=T0 + TTL) is None
    second = store.adopt_run(KEY.run_id, "gateway-2", now=T0 + TTL, expires_at=T0 + 2 * TTL)
    assert second is not None
    assert second.fence == first.fence + 1
    with pytest.raises(LeaseLost):
        store.append_step(first, _entry(0))
    store.append_step(second, _entry(0))
    store.cancel(KEY.run_id, T0 + TTL)
    assert (
        store.adopt_run(KEY.run_id, "gateway-3", now=T0 + 3 * TTL, expires_at=T0 + 4 * TTL) is None
    )


def test_a_worker_parks_a_dead_gateways_run_for_the_next_gateway(sqlite_url: str) -> None:
    """A worker that claims a dead gateway's run parks it, journaling nothing; the next
    gateway for the same client adopts it at once."""
    services = build_services(Settings(database_url=sqlite_url))
    now = SystemClock().now()
    services.store.create_run(KEY.run_id, WORKFLOW, KEY.to_json(), now)
    dead = services.store.adopt_run(KEY.run_id, "dead-gateway", now=now, expires_at=now)
    assert dead is not None
    services.store.append_step(dead, _entry(0))
    assert services.runtime.worker().run_once() == 1
    parked = services.runtime.get(KEY.run_id)
    assert (parked.status, parked.wait_key) == (RunStatus.WAITING, DETACHED)
    assert len(services.runtime.journal(KEY.run_id)) == 1
    run = attach(services, KEY, patience=timedelta(0))
    try:
        assert run.next_position == 1
        assert services.runtime.get(KEY.run_id).status == RunStatus.RUNNING
    finally:
        run.detach()
        services.store.engine.dispose()


def test_a_gated_call_is_asked_in_the_slack_channel_named(sqlite_url: str) -> None:
    """With a channel, the run's root message and the approval's cards (thread and each
    approver's DM) are queued for Slack with the approval, like a native tool's; the
    gateway parks its run when it detaches."""
    services = build_services(Settings(database_url=sqlite_url))
    run = attach(services, KEY, patience=timedelta(0), channel="C_GATEWAY")
    try:
        policy = ApprovalPolicy(approvers=("U1", "U2")).snapshot({})
        call = SignOffs(run, Actor(user_id="U_AGENT")).open(
            CallRequest(
                tool="delete_note", args={"title": "a"}, gated=True, definition="d", policy=policy
            )
        )
        with services.store.engine.connect() as conn:
            keys = set(
                conn.execute(select(outbox.c.key).where(outbox.c.kind != ROOT_UPDATE)).scalars()
            )
        approval = call.approval_id
        assert approval is not None
        assert keys == {
            root_key(KEY.run_id),
            card_key(approval),
            card_key(approval, "U1"),
            card_key(approval, "U2"),
        }
        assert services.approvals.get(approval).tool == "mcp:notes:delete_note"
    finally:
        run.detach()
        services.store.engine.dispose()
    parked = services.runtime.get(KEY.run_id)
    assert (parked.status, parked.wait_key) == (RunStatus.WAITING, DETACHED)


def test_a_new_gateway_answers_the_last_call_again_once(sqlite_url: str) -> None:
    """The first identical call in a new gateway gets the last call's journaled answer (the
    client may never have received it); a further identical call is a new call."""
    services = build_services(Settings(database_url=sqlite_url))
    request = CallRequest(tool="wipe", args={"n": 1}, gated=False, definition="d", policy=None)
    client = Actor(user_id="U_AGENT")
    run = attach(services, KEY, patience=timedelta(0))
    signoffs = SignOffs(run, client)
    first = signoffs.open(request)
    assert not isinstance(signoffs.start(first, "d"), str)
    signoffs.finish(first, {"content": [], "isError": False})
    run.detach()
    run = attach(services, KEY, patience=timedelta(0))
    try:
        again = SignOffs(run, client)
        retried = again.open(request)
        assert (retried.position, retried.result) == (first.position, first.result)
        fresh = again.open(request)
        assert fresh.position > first.position
        assert fresh.result is None
    finally:
        run.detach()
        services.store.engine.dispose()


def test_an_approved_call_runs_only_as_approved_and_once(sqlite_url: str) -> None:
    """A call is refused if the tool or its policy changed since it was made (gated or not:
    the policy may gate it now); an approved one goes with the approved (edited) arguments,
    consuming the approval."""
    services = build_services(Settings(database_url=sqlite_url))
    run = attach(services, KEY, patience=timedelta(0))
    try:
        signoffs = SignOffs(run, Actor(user_id="U_AGENT"))
        policy = ApprovalPolicy(approvers=("U1",)).snapshot({})
        call = signoffs.open(
            CallRequest(tool="wipe", args={"n": 1}, gated=True, definition="before", policy=policy)
        )
        assert call.approval_id is not None
        services.approvals.decide(
            call.approval_id, Actor(user_id="U1"), Decision.EDIT, edited_args={"n": 2}
        )
        assert signoffs.decision(call) is not None
        assert signoffs.start(call, "after") == (
            "the tool or its policy changed since the call was made"
        )
        assert services.approvals.get(call.approval_id).consumed_by is None
        go = signoffs.start(call, "before")
        assert not isinstance(go, str)
        assert go.args == {"n": 2}
        assert services.approvals.get(call.approval_id).consumed_by == call.position
        ungated = signoffs.open(
            CallRequest(tool="wipe", args={"n": 3}, gated=False, definition="before", policy=None)
        )
        assert isinstance(signoffs.start(ungated, "after"), str)
    finally:
        run.detach()
        services.store.engine.dispose()
