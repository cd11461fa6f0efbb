"""``/agent <task>`` is acknowledged before its run is created, and the run is never lost.

The acknowledgement promises a run id; the request's replay-guard record, written before the
ack, carries that run, so a process killed after its ack loses nothing: another process's
sweep starts the run under the promised id.
"""

from __future__ import annotations

import logging
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest
from sqlalchemy import func, select

from agent_runtime import RunNotFound, WorkflowNotFound
from agent_runtime.clock import SystemClock
from bot.app.jobs import intake_sweep
from bot.ops.supervision import EXIT_DRAIN_TIMEOUT
from bot.slack.intake import IntakeSweep
from store import models
from store.replay_guard import REPLAY_WINDOW, SqlReplayGuard
from tests.flows import HOLD_RUN_CREATION_ENV, held_run_creation
from tests.integration.response_urls import ResponseUrls
from tests.integration.serve_cluster import Cluster, ServeProcess
from tests.integration.slack_harness import (
    TASK,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import run_id_of
from tests.integration.slack_steps import (
    ShiftedClock,
    acked,
)

DRAIN_WAIT_S = 90.0
"""How long a stopping serve may take to exit before the test fails (well past its drain)."""


def run_count(bot: BotInstance) -> int:
    """How many runs the database holds."""
    with bot.services.store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(models.runs)).scalar_one())


def seen_count(bot: BotInstance) -> int:
    """How many request signatures the database remembers."""
    with bot.services.store.engine.connect() as conn:
        return int(
            conn.execute(select(func.count()).select_from(models.seen_requests)).scalar_one()
        )


@pytest.mark.postgres
def test_a_run_acknowledged_by_a_process_killed_after_its_ack_is_started_by_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A is SIGKILLed after acking ``/agent <task>`` but before creating the run; B's sweep
    starts that run under the promised id, once, and it reaches its refund's card."""
    hold = tmp_path / "hold-run-creation"
    hold.touch()
    a = held_serve(cluster, hold)

    ack = acked(a.post(a.command_body(TASK), settle=False))
    run_id = run_id_of(ack)
    with pytest.raises(RunNotFound):
        cluster.reader.runtime.get(run_id)
    a.sigkill()

    [b] = cluster.start("B")
    b.wait_started(ack)  # after the sweep's grace
    approvals = cluster.waiting_with_cards(run_id)
    assert sorted(approvals) == ["issue_refund"], "the email is asked after the refund"
    assert run_count(b) == 1
    assert cluster.reader.runtime.get(run_id).input["task"] == TASK
    assert any(
        "acknowledged run started by the sweep" in line and run_id in line
        for line in b.output().splitlines()
    )


@pytest.mark.postgres
def test_a_serve_stopped_while_creating_an_acknowledged_run_creates_it_before_it_drains(
    cluster: Cluster, tmp_path: Path
) -> None:
    """SIGTERM reaches A while the run it acknowledged is still being created: A creates it
    before it logs ``drained``, and exits 0."""
    hold = tmp_path / "hold-run-creation"
    hold.touch()
    a = held_serve(cluster, hold, drain_seconds=60)
    run_id = run_id_of(acked(a.post(a.command_body(TASK), settle=False)))
    cluster.wait(held_run_creation(hold).exists, what="the run's creation held")
    a.process.send_signal(signal.SIGTERM)
    cluster.wait(lambda: ": draining " in a.output(), what="A draining")
    hold.unlink()
    assert a.process.wait(timeout=DRAIN_WAIT_S) == 0, a.output()
    lines = a.output().splitlines()
    started = next(
        i for i, line in enumerate(lines) if "run started after its ack" in line and run_id in line
    )
    drained = next(i for i, line in enumerate(lines) if ": drained " in line)
    assert started < drained, a.output()
    assert cluster.reader.runtime.get(run_id).input["task"] == TASK


@pytest.mark.postgres
def test_a_serve_whose_acknowledged_work_outlasts_its_drain_deadline_still_exits(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Work after an ack that never ends does not keep a stopping A alive: it exits with the
    drain timeout's status once ``SIGNOFF_DRAIN_SECONDS`` have passed."""
    hold = tmp_path / "hold-run-creation"
    hold.touch()
    a = held_serve(cluster, hold, drain_seconds=1)
    acked(a.post(a.command_body(TASK), settle=False))
    cluster.wait(held_run_creation(hold).exists, what="the run's creation held")
    a.process.send_signal(signal.SIGTERM)
    assert a.process.wait(timeout=DRAIN_WAIT_S) == EXIT_DRAIN_TIMEOUT, a.output()


def held_serve(cluster: Cluster, hold: Path, *, drain_seconds: int | None = None) -> ServeProcess:
    """A healthy ``serve --no-worker`` named A whose run creations wait while ``hold``
    exists (and that drains within ``drain_seconds``, if given)."""
    drain = {} if drain_seconds is None else {"SIGNOFF_DRAIN_SECONDS": str(drain_seconds)}
    a = ServeProcess(
        cluster.world,
        "A",
        cluster.reader,
        {**cluster.env, HOLD_RUN_CREATION_ENV: str(hold), **drain},
        "--no-worker",
    )
    cluster.processes.append(a)
    a.wait_healthy()
    return a


def test_the_listener_logs_the_promised_run_it_started(
    world: SlackWorld, bot: BotInstance, caplog: pytest.LogCaptureFixture
) -> None:
    """The process that acked ``/agent`` logs that it started the promised run after the ack
    (the sweep logs its own line), so a log tells which path started a run."""

    def logged(run_id: str) -> bool:
        return any(
            r.getMessage() == "acknowledged run started after its ack"
            and getattr(r, "run_id", None) == run_id
            for r in caplog.records
        )

    with caplog.at_level(logging.INFO, logger="bot.slack.command_listener"):
        run_id = run_id_of(acked(bot.command(TASK)))
        eventually(lambda: logged(run_id), what="the listener's line")


def test_the_sweep_leaves_a_run_its_listener_started_and_starts_nothing_twice(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Once the listener started the promised run, a sweep (even much later) starts none."""
    run_id = run_id_of(acked(bot.command(TASK)))
    clock = ShiftedClock()
    clock.offset = timedelta(minutes=1)
    sweep = IntakeSweep(bot.services.runtime, SqlReplayGuard(bot.services.store.engine), clock)
    assert sweep.sweep_once() == 0
    assert [r.id for r in bot.services.runtime.runs()] == [run_id]


def test_expired_signatures_are_forgotten_by_the_sweep_not_by_requests(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Requests only add signatures; the sweep deletes those past the replay window."""
    acked(bot.command("help"))
    acked(bot.command("list"))
    assert seen_count(bot) == 2
    intake_sweep(bot.services).sweep_once()
    assert seen_count(bot) == 2
    clock = ShiftedClock()
    clock.offset = REPLAY_WINDOW + timedelta(seconds=1)
    IntakeSweep(bot.services.runtime, SqlReplayGuard(bot.services.store.engine), clock).sweep_once()
    assert seen_count(bot) == 0
    assert SystemClock().now()  # the real clock is untouched


def test_a_run_that_fails_to_start_after_the_ack_is_told_and_started_by_the_sweep(
    world: SlackWorld, bot: BotInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The requester hears through the command's response_url that the run has not started
    yet; the sweep starts the promised run once starting works again."""
    runtime = bot.services.runtime
    working_start = runtime.start

    def failing_start(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("injected: run creation fails")

    monkeypatch.setattr(runtime, "start", failing_start)
    with ResponseUrls() as urls:
        fields = dict(parse_qsl(bot.command_body(TASK).decode()))
        fields["response_url"] = urls.url("command")
        run_id = run_id_of(acked(bot.post(urlencode(fields).encode(), settle=False)))
        [told] = eventually(lambda: urls.texts("command"), what="the requester told")
    assert told.startswith(f"Signoff could not start run `{run_id}` yet")
    with pytest.raises(RunNotFound):
        runtime.get(run_id)

    monkeypatch.setattr(runtime, "start", working_start)
    clock = ShiftedClock()
    clock.offset = timedelta(minutes=1)
    assert IntakeSweep(runtime, SqlReplayGuard(bot.services.store.engine), clock).sweep_once() == 1
    assert runtime.get(run_id).input["task"] == TASK


def test_a_run_refused_after_the_ack_is_told_once_and_not_retried(
    world: SlackWorld, bot: BotInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal no retry cures (the workflow is gone) is told to the requester with its
    reason, and the sweep does not try again."""
    runtime = bot.services.runtime

    def refusing_start(workflow: str, *args: Any, **kwargs: Any) -> Any:
        raise WorkflowNotFound(workflow, [])

    monkeypatch.setattr(runtime, "start", refusing_start)
    with ResponseUrls() as urls:
        fields = dict(parse_qsl(bot.command_body(TASK).decode()))
        fields["response_url"] = urls.url("command")
        run_id = run_id_of(acked(bot.post(urlencode(fields).encode(), settle=False)))
        [told] = eventually(lambda: urls.texts("command"), what="the requester told")
    assert told.startswith(f"Sorry: run `{run_id}` could not start: unknown workflow")
    later = ShiftedClock()
    later.offset = timedelta(minutes=1)
    assert SqlReplayGuard(bot.services.store.engine).unfinished(later.now()) == []
