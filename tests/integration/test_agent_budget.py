"""Budgets with real ``signoff`` processes: a run stops before the call that would cross its
limit — also when the limit is crossed across a SIGKILL and a resume — a person on the
list raises it and the run completes, anyone else is refused; and re-running a finished
run's workflow from its journal calls neither the model nor a tool.

Two agents: the demo agent with a USD budget (``signoff run --budget-usd``; its scripted
model costs about $0.0012, $0.0023 and $0.0019 for its three calls), and the counting agent
of ``agent_helpers`` (``SIGNOFF_AGENT``) with a budget of 3 model calls for work that needs
5, whose model logs every real invocation to a file and can be slowed down, so that a
SIGKILL lands inside a chosen model call.

The workers a test SIGKILLs are started from the ``signoff`` script; the workers that only
move runs along are processes forked from a warm launcher. Each command's exit status and
output are proven by one ``signoff`` process; its other uses, and reads of state, run through
the same entry point in the test's process.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from agent_runtime import Actor, ApprovalStatus, Decision, RunId, RunStatus, StepRecord
from agent_runtime.approvals import ApprovalKind
from bot.app.wiring import Services
from store.models import runs
from tests.integration import WorkerProcess, cli_ok, run_cli, wait_until
from tests.integration.agent_helpers import (
    APPROVER,
    COUNTING_AGENT,
    COUNTING_MODEL_CALLS,
    MODEL_DELAY_ENV,
    MODEL_LOG_ENV,
    OUTSIDER,
    REQUESTER,
    TASK,
    TICKS,
    TOOL_LOG_ENV,
    DemoProvider,
    RunProbe,
    RunState,
    agent_env,
    log_lines,
    model_steps,
    named,
    refund_requests,
    services_for,
)
from tests.integration.in_process import Cli, InProcessCli
from tests.integration.worker_processes import (
    Launcher,
)

DEMO_BUDGET_USD = 0.0015
"""Room for the demo's first model call ($0.0012) and not its second ($0.0023 more)."""
RAISED_USD = 0.05
MODEL_DELAY_S = 0.3


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoProvider]:
    """One demo provider for the module."""
    with DemoProvider(tmp_path_factory.mktemp("provider")) as running:
        yield running


def show(cli: Cli, env: dict[str, str], run_id: str) -> dict[str, Any]:
    """Return ``signoff show RUN --json``, run with ``cli``."""
    done = cli(env, "show", run_id, "--json")
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


def budget_approval(env: dict[str, str], run_id: str) -> str:
    """The id of the run's one pending approval, which asks to raise its budget."""
    with services_for(env) as services:
        [asked] = services.approvals.store.list_approvals(
            run_id=run_id, status=ApprovalStatus.PENDING
        )
    assert asked.kind == ApprovalKind.BUDGET, asked
    return asked.id


def exhausted(journal: list[StepRecord]) -> list[dict[str, Any]]:
    """The outputs of the journal's ``budget.exhausted`` entries."""
    return [s.output for s in named(journal, "budget.exhausted")]


def test_usd_budget_stops_before_the_crossing_call_and_a_raise_finishes_the_run(
    sqlite_url: str,
    provider: DemoProvider,
    launcher: Launcher,
    cli_here: InProcessCli,
    tmp_path: Path,
) -> None:
    """$0.0015 stops the demo run after 1 model call; only an approver's raise lets it finish."""
    env = agent_env(sqlite_url, provider.url)
    started = json.loads(
        cli_ok(env, "run", TASK, "--as", REQUESTER, "--budget-usd", str(DEMO_BUDGET_USD), "--json")
    )
    run_id = started["id"]
    launcher.work(env, tmp_path)

    shown = show(cli_here, env, run_id)
    asked = budget_approval(env, run_id)
    assert (shown["status"], shown["wait_key"]) == ("waiting", f"approval:{asked}")
    assert shown["usage"]["model_calls"] == 1
    assert shown["usage"]["cost_usd"] <= DEMO_BUDGET_USD
    (stop,) = [s["output"] for s in shown["steps"] if s["name"] == "budget.exhausted"]
    assert (stop["limit"], stop["wait_key"]) == ("cost_usd", "budget:1")
    assert stop["budget"]["cost_usd"] == DEMO_BUDGET_USD
    assert stop["used"]["cost_usd"] <= DEMO_BUDGET_USD

    refused = run_cli(env, "raise-budget", run_id, "--usd", str(RAISED_USD), "--as", OUTSIDER)
    assert refused.returncode == 1, refused.stderr
    assert "you are not allowed to decide this approval" in refused.stdout
    assert show(cli_here, env, run_id)["wait_key"] == f"approval:{asked}", (
        "the refused raise changed nothing"
    )

    cli_here.ok(env, "raise-budget", run_id, "--usd", str(RAISED_USD), "--as", APPROVER)
    with services_for(env) as services:
        launcher.work(env, tmp_path)
        while pending := services.approvals.store.list_approvals(
            run_id=run_id, status=ApprovalStatus.PENDING
        ):  # the refund's, then the email's
            for approval in pending:
                assert services.approvals.decide(
                    approval.id, Actor(user_id=APPROVER), Decision.APPROVE
                ).accepted
            launcher.work(env, tmp_path)

    shown = show(cli_here, env, run_id)
    assert shown["status"] == "completed", shown["error"]
    assert "Refund: done" in shown["output"]["answer"]
    assert shown["output"]["budget"]["cost_usd"] == RAISED_USD
    assert shown["usage"]["model_calls"] == 4
    assert shown["usage"] == shown["output"]["usage"]
    assert shown["usage"]["cost_usd"] <= RAISED_USD
    assert sum(1 for e in refund_requests(provider.ledger(), run_id) if e["created_charge"]) == 1


def test_usd_budget_is_never_overshot_by_the_demo_model(
    sqlite_url: str,
    provider: DemoProvider,
    launcher: Launcher,
    cli_here: InProcessCli,
    tmp_path: Path,
) -> None:
    """A second call capped below its usual output keeps a $0.003 run within $0.003."""
    env = agent_env(sqlite_url, provider.url)
    run_id = cli_here.ok(env, "run", TASK, "--as", REQUESTER, "--budget-usd", "0.003").strip()
    with services_for(env) as services:
        launcher.work(env, tmp_path)
        assert show(cli_here, env, run_id)["usage"]["cost_usd"] <= 0.003
        for approval in services.approvals.store.list_approvals(run_id=run_id):
            assert services.approvals.decide(
                approval.id, Actor(user_id=APPROVER), Decision.APPROVE
            ).accepted
        launcher.work(env, tmp_path)

    shown = show(cli_here, env, run_id)
    asked = budget_approval(env, run_id)
    assert (shown["status"], shown["wait_key"]) == ("waiting", f"approval:{asked}")
    assert shown["usage"]["model_calls"] == 2
    assert shown["usage"]["cost_usd"] <= 0.003, shown["usage"]


@dataclass
class Counting:
    """A counting-agent run and everything to watch it."""

    env: dict[str, str]
    services: Services
    probe: RunProbe
    run_id: RunId
    model_log: Path
    tool_log: Path

    def journal(self) -> list[StepRecord]:
        """The run's journal now."""
        return self.services.store.load_journal(self.run_id)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def counting(
    request: pytest.FixtureRequest, tmp_path: Path, provider: DemoProvider, cli_here: InProcessCli
) -> Iterator[Counting]:
    """A counting-agent run (3 model calls allowed, 5 needed), started with `signoff run`."""
    if request.param == "sqlite":
        url: str = request.getfixturevalue("sqlite_url")
    else:
        request.getfixturevalue("pg_store")
        url = request.getfixturevalue("pg_url")
    model_log, tool_log = tmp_path / "model.log", tmp_path / "tool.log"
    env = agent_env(
        url,
        provider.url,
        extra={
            "SIGNOFF_AGENT": COUNTING_AGENT,
            MODEL_LOG_ENV: str(model_log),
            TOOL_LOG_ENV: str(tool_log),
            MODEL_DELAY_ENV: str(MODEL_DELAY_S),
        },
    )
    run_id = RunId(cli_here.ok(env, "run", "count the ticks", "--as", REQUESTER).strip())
    probe = RunProbe(url)
    with services_for(env) as services:
        yield Counting(env, services, probe, run_id, model_log, tool_log)
    probe.close()


def test_model_call_budget_holds_across_sigkills_and_resumes(
    counting: Counting, tmp_path: Path, launcher: Launcher, cli_here: InProcessCli
) -> None:
    """Killed inside model calls (the last one the budget allows included), it still stops at 3."""
    rng = random.Random(20)
    targets = [rng.randint(1, COUNTING_MODEL_CALLS - 1), COUNTING_MODEL_CALLS]
    for number, call in enumerate(targets, start=1):
        with WorkerProcess(
            counting.env, tmp_path / f"worker-{number}.log", concurrency=1
        ) as worker:

            def in_flight(call: int = call) -> bool:
                lines = log_lines(counting.model_log)
                done = len(model_steps(counting.journal()))
                return bool(lines) and lines[-1].startswith(f"call {call} ") and done == call - 1

            wait_until(
                in_flight,
                timeout=30,
                interval=0.01,
                alive=worker,
                what=f"model call {call} to be in flight",
            )
            worker.sigkill()
        assert len(model_steps(counting.journal())) == call - 1, "the call in flight was lost"

    with WorkerProcess(counting.env, tmp_path / "worker-last.log", concurrency=1) as worker:
        state = wait_until(
            lambda: _waiting(counting),
            timeout=30,
            alive=worker,
            what="the run to wait for a budget decision",
        )
        assert worker.stop() == 0, worker.output()
    assert state.wait_key == f"approval:{budget_approval(counting.env, counting.run_id)}"

    journal = counting.journal()
    assert len(model_steps(journal)) == COUNTING_MODEL_CALLS, "never more calls than the budget"
    (stop,) = exhausted(journal)
    assert stop["limit"] == "model_calls"
    assert stop["used"]["model_calls"] == stop["budget"]["model_calls"] == COUNTING_MODEL_CALLS
    first, last = targets
    made = [int(c.split()[1]) for c in log_lines(counting.model_log)]
    assert made == [*range(1, first + 1), *range(first, last + 1), last], (
        f"each killed call made once more, none past the budget: {made}"
    )

    refused = cli_here(
        counting.env, "raise-budget", counting.run_id, "--model-calls", "10", "--as", OUTSIDER
    )
    assert refused.returncode == 1, refused.stderr
    raised = ("raise-budget", counting.run_id, "--model-calls", "10", "--as", APPROVER)
    cli_here.ok(counting.env, *raised)
    launcher.work(counting.env, tmp_path)

    run = counting.services.runtime.get(counting.run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output["answer"] == f"counted to {TICKS}"
    assert run.output["usage"]["model_calls"] == TICKS + 1 <= run.output["budget"]["model_calls"]
    assert [t.split()[1] for t in log_lines(counting.tool_log)] == [
        str(n) for n in range(1, TICKS + 1)
    ], "each tick ran exactly once"


def _waiting(counting: Counting) -> RunState | None:
    state = counting.probe.state(counting.run_id)
    assert len(model_steps(counting.journal())) <= COUNTING_MODEL_CALLS
    return state if state.status == RunStatus.WAITING else None


def test_resuming_a_finished_run_replays_it_without_calling_model_or_tools(
    counting: Counting, tmp_path: Path, launcher: Launcher, cli_here: InProcessCli
) -> None:
    """A finished run made `failed` and `signoff resume`d replays its journal: zero calls."""
    launcher.work(counting.env, tmp_path)
    raised = ("raise-budget", counting.run_id, "--model-calls", "10", "--as", APPROVER)
    cli_here.ok(counting.env, *raised)
    launcher.work(counting.env, tmp_path)
    done = counting.services.runtime.get(counting.run_id)
    assert done.status == RunStatus.COMPLETED, done.error
    models, tools = log_lines(counting.model_log), log_lines(counting.tool_log)
    assert (len(models), len(tools)) == (TICKS + 1, TICKS)
    journal = counting.journal()

    with counting.services.store.engine.begin() as conn:
        conn.execute(
            update(runs)
            .where(runs.c.id == counting.run_id)
            .values(
                status=RunStatus.FAILED.value, error={"type": "Test", "message": "made to fail"}
            )
        )
    resumed = json.loads(cli_here.ok(counting.env, "resume", counting.run_id, "--json"))
    assert resumed["status"] == "pending"
    launcher.work(counting.env, tmp_path)

    again = counting.services.runtime.get(counting.run_id)
    assert again.status == RunStatus.COMPLETED, again.error
    assert again.output == done.output
    assert again.fence == done.fence + 1, "a worker really claimed and replayed it"
    assert log_lines(counting.model_log) == models, "no model call on replay"
    assert log_lines(counting.tool_log) == tools, "no tool call on replay"
    assert counting.journal() == journal, "nothing was added to the journal"
