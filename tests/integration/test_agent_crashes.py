"""The seed exercise, automated: SIGKILL real ``signoff worker`` processes running the demo
agent on "refund order 1042 and email the customer", at random moments, over and over.

A scenario has its own database and its own demo provider (a real HTTP server on
loopback whose ledger records every request). It keeps two ``signoff worker`` processes
alive — one working, one starting up or standing by, so that a replacement is ready when
the worker is killed — and runs the task again and again (each run gets 2-5 kills, then is
left to finish) until it has spent its kills. Each kill is a seeded-random choice of
``random.Random(seed)``:

- ``starting``: a worker still starting up, at a random moment of its start-up;
- ``at-step``: the worker holding the lease, as a randomly chosen journal entry of the
  stretch the run is in starts (replay, model call, tool call, approval request, wait),
  plus 0-3 ms;
- ``after-claim``: the worker holding the lease, a random 0-200 ms after it claimed the run.

The scenario approves each approval the run waits for (through the Approvals service, or
``signoff approve``, forked like the workers). Pause scenarios also kill a worker exactly
between the provider creating the refund and the worker journaling it (the provider's
``--pause-after-charge-file``). SQLite scenarios run side by side, one thread each (51
kills in all); one scenario runs on PostgreSQL (10 more).

Workers are ``signoff worker`` processes: started from the ``signoff`` script in one
SQLite scenario, and in the others forked by the test process's ``Launcher`` (shared by
every scenario) that has imported the command line once (``bot.cli.main.main(["worker",
...])`` in a process of its own, with its own database connections) — which saves the 0.6 s
of CPU an interpreter start costs, and keeps 60 kills within the time budget on a two-core
machine.

On PostgreSQL these tests first found that a demo run could not resume at all: ``jsonb``
gave the journaled ``lookup_order`` result back with its keys reordered, the tool message
sent to the model became another string, and the model step no longer matched its
journal entry (``NonDeterminismError``). Fixed since by sorting the keys of tool results.

What must hold for every run: it completes with the refund done; the provider's ledger
has exactly one charge for it; and every refund request the provider received for it
carries the idempotency key of the journal's one ``tool.started:issue_refund`` entry.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import Actor, ApprovalStatus, Decision, RunId, RunStatus
from bot.app.wiring import Services
from store import SqlStore
from tests.integration import cli_ok, wait_until
from tests.integration.agent_helpers import (
    APPROVER,
    DemoProvider,
    RunProbe,
    RunState,
    agent_env,
    all_refund_requests,
    email_requests,
    model_steps,
    named,
    refund_requests,
    services_for,
    start_demo_run,
)
from tests.integration.pgbouncer import reached
from tests.integration.worker_processes import (
    Launcher,
    ScriptWorker,
    Worker,
)

DELAY_SCALES = (0.003, 0.01, 0.03, 0.08, 0.2)
"""Upper bounds (s) of the random delay between a worker's claim and its SIGKILL."""
STARTUP_KILL_SHARE = 0.15
"""The share of kills aimed at a worker still starting up."""
STEP_KILL_SHARE = 0.45
"""The share aimed at a random journal entry of the current stretch, as it starts."""
KILLS_PER_RUN = (2, 5)
"""How many random kills one run gets (at most), before it is left to finish."""
LIVE_WORKERS = 2
LEASE_TTL_S = 1.5
"""Short, so that a standby takes a killed worker's run over soon; long enough that a
worker on a heavily loaded machine (load average 15 on two cores) keeps renewing its lease
instead of losing it to the standby again and again."""
LAST_ENTRY = 19
"""The demo run's last journal position (it has 20 entries)."""
BEFORE_THE_REFUND = 8
"""The journal length at which the demo run waits for the refund's approval, the last stop
before the refund: a run kept for the kill between charge and commit is killed before it."""
SCENARIO_TIMEOUT_S = 240.0
CLAIMED, AT_STEP, STARTING = "after-claim", "at-step", "starting"
PAUSED = "between-charge-and-commit"


@dataclass(frozen=True)
class Scenario:
    """Runs of the task on one database, with ``kills`` random SIGKILLs among them."""

    seed: int
    kills: int
    pause: bool = False
    approve_with_cli: bool = False
    check_with_cli: bool = False
    script_workers: bool = False
    """Start every worker from the ``signoff`` script rather than fork it from a Launcher."""


@dataclass(frozen=True)
class Kill:
    """Where one SIGKILL landed: the journal length at the claim and at the kill."""

    mode: str
    run_id: str
    journal_at_claim: int
    journal_at_kill: int
    status_after: RunStatus


@dataclass
class Outcome:
    """What a scenario did."""

    scenario: Scenario
    runs: list[RunId] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    workers: int = 0
    commands: int = 0
    seconds: float = 0.0


class CrashDriver:
    """Runs the task until the scenario's kills are spent, killing workers as it goes."""

    def __init__(
        self,
        scenario: Scenario,
        directory: Path,
        database_url: str,
        provider: DemoProvider,
        services: Services,
        launcher: Launcher,
    ) -> None:
        self.scenario = scenario
        self.launcher = launcher
        self.directory = directory
        self.provider = provider
        self.services = services
        self.env = agent_env(database_url, provider.url, lease_ttl=LEASE_TTL_S)
        self.probe = RunProbe(database_url)
        self.rng = random.Random(scenario.seed)
        self.alive: list[Worker] = []
        self.paused = False
        self.outcome = Outcome(scenario)
        self.run_id = RunId("")

    def drive(self) -> Outcome:
        """Start runs and kill workers until the kills are spent; stop the last workers."""
        began = time.monotonic()
        deadline = began + SCENARIO_TIMEOUT_S
        try:
            while self._random_kills() < self.scenario.kills or (
                self.scenario.pause and not self.paused
            ):
                self._one_run(deadline)
            for worker in self.alive:
                assert worker.stop() == 0, worker.output()
        finally:
            for worker in self.alive:
                worker.close()
            self.probe.close()
        self.outcome.seconds = time.monotonic() - began
        return self.outcome

    def _one_run(self, deadline: float) -> None:
        self.run_id = start_demo_run(self.services)
        self.outcome.runs.append(self.run_id)
        run_kills = self._random_kills() + self.rng.randint(*KILLS_PER_RUN)
        if self.scenario.pause and not self.paused:
            self._release_an_unseen_pause()
            self.provider.arm_pause()
        while (state := self.probe.state(self.run_id)).status != RunStatus.COMPLETED:
            assert time.monotonic() < deadline, self._context("the scenario took too long")
            assert state.status not in (RunStatus.FAILED, RunStatus.CANCELLED), self._context(
                f"the run ended {state.status}"
            )
            if state.status == RunStatus.WAITING:
                self._decide(state)
            elif self.scenario.pause and not self.paused and self._refund_is_next():
                self._kill_inside_the_refund()
            elif self._random_kills() < min(self.scenario.kills, run_kills):
                self._kill_at_random()
            else:
                self._fill(1)
                wait_until(self._settled, timeout=60, what="the run to complete or wait")

    def _kill_at_random(self) -> None:
        """Kill a worker at a seeded-random moment of one of three kinds (see the module doc)."""
        draw = self.rng.random()
        if draw < STARTUP_KILL_SHARE:
            self._fill(LIVE_WORKERS - 1)
            worker = self._spawn()
            time.sleep(self.rng.uniform(0.05, 0.6))
            self._kill(worker, STARTING, self.probe.state(self.run_id).journal)
            return
        self._fill(LIVE_WORKERS)
        if draw < STARTUP_KILL_SHARE + STEP_KILL_SHARE:
            now = self.probe.state(self.run_id).journal
            last = BEFORE_THE_REFUND if self.scenario.pause and not self.paused else LAST_ENTRY
            self._kill_at_step(self.rng.randint(now, max(now, last)))
            return
        state = wait_until(
            self._claimed, timeout=60, interval=0.002, what="a worker to claim the run"
        )
        holder = self._holder(state)
        if holder is None:
            return  # the run parked or completed before the claim was seen: no kill
        time.sleep(self.rng.uniform(0.0, self.rng.choice(DELAY_SCALES)))
        self._kill(holder, CLAIMED, state.journal)

    def _kill_at_step(self, target: int) -> None:
        """Kill the working worker as journal entry ``target`` starts, approving on the way."""
        while True:
            state = wait_until(
                lambda: self._reached(target),
                timeout=60,
                interval=0.001,
                what=f"journal entry {target} to start",
            )
            holder = self._holder(state)
            if state.journal >= target:
                if holder is not None:
                    time.sleep(self.rng.uniform(0.0, 0.003))
                    self._kill(holder, AT_STEP, state.journal)
                return  # else it parked right at the target: no kill
            if state.status != RunStatus.WAITING:
                return  # completed first: no kill
            self._decide(state)

    def _reached(self, target: int) -> RunState | None:
        state = self._state()
        if (state.journal >= target and self._holder(state) is not None) or state.status in (
            RunStatus.WAITING,
            RunStatus.COMPLETED,
        ):
            return state
        return None

    def _kill_inside_the_refund(self) -> None:
        """SIGKILL while the provider holds the answer to the refund it has just committed."""
        pause_file = self.provider.pause_file
        assert pause_file is not None
        self._fill(LIVE_WORKERS)
        wait_until(
            lambda: self._state() and pause_file.exists() and self._charged(),
            timeout=30,
            what="the provider to pause after this run's charge",
        )
        state = self.probe.state(self.run_id)
        holder = self._holder(state)
        assert holder is not None, self._context("nobody holds the paused run")
        self._kill(holder, PAUSED, state.journal)
        journal = self.services.store.load_journal(self.run_id)
        assert journal[-1].name == "tool.started:issue_refund", self._context("no refund in flight")
        charges = [
            e for e in refund_requests(self.provider.ledger(), self.run_id) if e["created_charge"]
        ]
        assert [e["idempotency_key"] for e in charges] == [journal[-1].output["key"]], (
            "the provider committed exactly this charge before the kill"
        )
        pause_file.unlink()
        self.paused = True

    def _release_an_unseen_pause(self) -> None:
        """End a pause an earlier run's refund hit between two looks at its state (its run
        went on once a retry with the same key was answered): this run's refund must make
        a pause of its own."""
        assert self.provider.pause_file is not None
        self.provider.pause_file.unlink(missing_ok=True)

    def _charged(self) -> bool:
        """Whether the provider has created a charge for this run's refund."""
        return any(
            e["created_charge"] for e in refund_requests(self.provider.ledger(), self.run_id)
        )

    def _random_kills(self) -> int:
        return sum(1 for k in self.outcome.kills if k.mode != PAUSED)

    def _kill(self, worker: Worker, mode: str, journal_at_claim: int) -> None:
        worker.sigkill()
        worker.close()
        self.alive.remove(worker)
        state = self.probe.state(self.run_id)
        self.outcome.kills.append(
            Kill(mode, self.run_id, journal_at_claim, state.journal, state.status)
        )

    def _fill(self, count: int) -> None:
        self.alive = [w for w in self.alive if w.running()]
        while len(self.alive) < count:
            self._spawn()

    def _spawn(self) -> Worker:
        self.outcome.workers += 1
        log = self.directory / f"worker-{self.outcome.workers:03d}.log"
        worker: Worker = (
            ScriptWorker(self.env, log)
            if self.scenario.script_workers
            else self.launcher.worker(self.env, log)
        )
        self.alive.append(worker)
        return worker

    def _holder(self, state: RunState) -> Worker | None:
        return next((w for w in self.alive if w.pid == state.holder_pid), None)

    def _claimed(self) -> RunState | None:
        state = self._state()
        if self._holder(state) is not None or state.status in (
            RunStatus.WAITING,
            RunStatus.COMPLETED,
        ):
            return state
        return None

    def _state(self) -> RunState:
        """The run's state now; fails at once if the run failed or was cancelled."""
        state = self.probe.state(self.run_id)
        assert state.status not in (RunStatus.FAILED, RunStatus.CANCELLED), self._context(
            f"the run ended {state.status}"
        )
        return state

    def _settled(self) -> RunState | None:
        state = self._state()
        return state if state.status in (RunStatus.WAITING, RunStatus.COMPLETED) else None

    def _refund_is_next(self) -> bool:
        """The refund is approved and has not finished: it runs next, or already runs (a
        worker may take the approval between the decision and this look; the provider then
        holds its answer), and the email is asked only after it."""
        found = self.services.approvals.store.list_approvals(run_id=self.run_id)
        approved = any(
            a.tool == "issue_refund" and a.status == ApprovalStatus.APPROVED for a in found
        )
        journal = self.services.store.load_journal(self.run_id)
        return approved and not any(entry.name == "tool:issue_refund" for entry in journal)

    def _decide(self, state: RunState) -> None:
        key = state.wait_key or ""
        assert key.startswith("approval:"), self._context(f"unexpected wait {key!r}")
        approval = key.removeprefix("approval:")
        if self.scenario.approve_with_cli:
            self.outcome.commands += 1
            log = self.directory / f"approve-{self.outcome.commands:03d}.log"
            code, output = self.launcher.run(self.env, log, "approve", approval, "--as", APPROVER)
            assert (code, output.strip()) == (0, f"approved by {APPROVER}"), output
        else:
            result = self.services.approvals.decide(
                approval, Actor(user_id=APPROVER), Decision.APPROVE
            )
            assert result.accepted, result.message

    def _context(self, message: str) -> str:
        journal = self.services.store.load_journal(self.run_id)
        run = self.services.runtime.get(self.run_id)
        logs = sorted(self.directory.glob("worker-*.log"))
        tails = "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in logs[-3:]
        )
        return (
            f"{message} (seed {self.scenario.seed}, run {self.run_id}, {run.status}, "
            f"error {run.error}, kills so far {len(self.outcome.kills)})\n"
            f"journal: {[s.name for s in journal]}\n{tails}"
        )


def check_run(services: Services, ledger: list[dict[str, Any]], run_id: RunId, where: str) -> None:
    """The run completed with the refund done, one charge, and one key for every retry."""
    run = services.runtime.get(run_id)
    assert run.status == RunStatus.COMPLETED, where
    answer = run.output["answer"]
    assert "Refund: done" in answer, (answer, where)
    assert "Email: done" in answer, (answer, where)
    journal = services.store.load_journal(run_id)
    assert len(model_steps(journal)) == 4 == run.output["usage"]["model_calls"], where
    asked = [s.name for s in journal if s.name.startswith("approval.request:")]
    refund_at = named(journal, "tool:issue_refund")[0].position
    assert asked == ["approval.request:issue_refund", "approval.request:send_email"], where
    assert named(journal, "approval.request:send_email")[0].position > refund_at, (
        f"the email is asked only once the refund is done ({where})"
    )

    (started,) = named(journal, "tool.started:issue_refund")
    key = started.output["key"]
    assert key == f"signoff-{run_id}-{started.position}", where
    (refunded,) = named(journal, "tool:issue_refund")
    refunds = refund_requests(ledger, run_id)
    assert {e["idempotency_key"] for e in refunds} == {key}, (
        f"every refund request reuses the journal's key {key}: {refunds} ({where})"
    )
    charges = [e for e in refunds if e["created_charge"]]
    assert len(charges) == 1, f"exactly one charge: {refunds} ({where})"
    assert charges[0]["charge_id"] == refunded.output["id"], where
    assert {e["status"] for e in refunds} <= {200, 201}, [
        (e["seq"], e["status"], e["body"]) for e in refunds
    ]
    for unknown in named(journal, "tool.unknown_outcome:issue_refund"):
        assert unknown.output == {"key": key, "strategy": "retry"}, unknown.output

    (email_started,) = named(journal, "tool.started:send_email")
    emails = email_requests(ledger, run_id)
    assert {e["idempotency_key"] for e in emails} == {email_started.output["key"]}, emails
    assert [e["status"] for e in emails].count(201) == 1, emails


def check_with_cli(env: dict[str, str], provider: DemoProvider, run_id: RunId) -> None:
    """``signoff show --json`` and ``signoff demo ledger --json`` tell the same story."""
    shown = json.loads(cli_ok(env, "show", run_id, "--json"))
    ledger = json.loads(cli_ok(env, "demo", "ledger", "--url", provider.url, "--json"))
    assert shown["status"] == "completed"
    assert "Refund: done" in shown["output"]["answer"]
    (started,) = [s for s in shown["steps"] if s["name"] == "tool.started:issue_refund"]
    refunds = refund_requests(ledger, run_id)
    assert {e["idempotency_key"] for e in refunds} == {started["output"]["key"]}
    assert sum(1 for e in refunds if e["created_charge"]) == 1


def drive_scenario(
    scenario: Scenario, directory: Path, database_url: str, launcher: Launcher
) -> Outcome:
    """Run one scenario in ``directory`` on ``database_url`` (forking its workers from
    ``launcher``, unless it starts them from the script) and check all its runs."""
    directory.mkdir(parents=True, exist_ok=True)
    pause_file = directory / "paused" if scenario.pause else None
    with DemoProvider(directory, pause_file=pause_file) as provider:
        env = agent_env(database_url, provider.url, lease_ttl=LEASE_TTL_S)
        with services_for(env) as services:
            outcome = CrashDriver(
                scenario, directory, database_url, provider, services, launcher
            ).drive()
            ledger = provider.ledger()
            where = f"seed {scenario.seed}: {summary([outcome])}"
            mine = {
                key
                for run_id in outcome.runs
                for key in (e["idempotency_key"] for e in refund_requests(ledger, run_id))
            }
            assert {e["idempotency_key"] for e in all_refund_requests(ledger)} == mine, where
            for run_id in outcome.runs:
                check_run(services, ledger, run_id, where)
        if scenario.pause:
            paused = next(k.run_id for k in outcome.kills if k.mode == PAUSED)
            refunds = refund_requests(ledger, paused)
            assert len(refunds) >= 2, "the paused request, then its retry under the same key"
        if scenario.check_with_cli:
            check_with_cli(env, provider, outcome.runs[-1])
    return outcome


def summary(outcomes: list[Outcome]) -> str:
    """Say where the kills landed."""
    kills = [k for o in outcomes for k in o.kills]
    runs = sum(len(o.runs) for o in outcomes)
    modes = Counter(k.mode for k in kills)
    positions = Counter(k.journal_at_kill for k in kills if k.mode in (CLAIMED, AT_STEP))
    took = ", ".join(f"seed {o.scenario.seed}: {o.seconds:.1f}s" for o in outcomes)
    return (
        f"{len(kills)} kills over {runs} runs ({took}); modes {dict(modes)}; journal "
        f"length at the kills of working workers {dict(sorted(positions.items()))}"
    )


SQLITE_SCENARIOS = (
    Scenario(seed=1042, kills=11, pause=True, check_with_cli=True),
    Scenario(seed=7, kills=6, script_workers=True),
    Scenario(seed=2024, kills=11, approve_with_cli=True),
    Scenario(seed=99, kills=11),
    Scenario(seed=31337, kills=11),
)
POSTGRES_SCENARIO = Scenario(
    seed=5432, kills=9, pause=True, approve_with_cli=True, check_with_cli=True
)


def test_sigkilled_workers_on_sqlite_never_charge_twice(tmp_path: Path, launcher: Launcher) -> None:
    """50 random SIGKILLs + 1 between charge and commit (SQLite): one charge, one key per run."""

    def one(scenario: Scenario) -> Outcome:
        directory = tmp_path / f"seed-{scenario.seed}"
        url = f"sqlite:///{directory / 'signoff.db'}"
        return drive_scenario(scenario, directory, url, launcher)

    with ThreadPoolExecutor(max_workers=len(SQLITE_SCENARIOS)) as pool:
        outcomes = list(pool.map(one, SQLITE_SCENARIOS))

    kills = [k for o in outcomes for k in o.kills]
    assert len(kills) == sum(s.kills for s in SQLITE_SCENARIOS) + 1, summary(outcomes)
    assert [k.mode for k in kills].count(PAUSED) == 1
    landed = {k.journal_at_kill for k in kills if k.mode in (CLAIMED, AT_STEP)}
    assert len(landed) >= 8, f"kills should land all over the journal: {summary(outcomes)}"
    print(summary(outcomes))


@pytest.mark.postgres
def test_demo_run_on_postgres_resumes_after_its_approvals(
    tmp_path: Path, deployed_pg_url: str, pg_store: SqlStore, launcher: Launcher
) -> None:
    """No kill at all: the seed exercise on PostgreSQL, reached directly or through
    PgBouncer in session or transaction mode, resumes after its approvals and completes."""
    with DemoProvider(tmp_path) as provider:
        env = agent_env(deployed_pg_url, provider.url)
        with services_for(env) as services:
            run_id = start_demo_run(services)
            launcher.work(env, tmp_path)
            while pending := services.approvals.store.list_approvals(
                run_id=run_id, status=ApprovalStatus.PENDING
            ):  # the refund's, then the email's
                for approval in pending:
                    assert services.approvals.decide(
                        approval.id, Actor(user_id=APPROVER), Decision.APPROVE
                    ).accepted
                launcher.work(env, tmp_path)
            run = services.runtime.get(run_id)
            assert run.status == RunStatus.COMPLETED, run.error
            check_run(services, provider.ledger(), run_id, f"run {run_id}")


@pytest.mark.postgres
@pytest.mark.parametrize("how", ["direct", "transaction-pooled"])
def test_sigkilled_workers_on_postgres_never_charge_twice(
    tmp_path: Path, how: str, pg_url: str, pg_store: SqlStore, launcher: Launcher
) -> None:
    """9 random SIGKILLs + 1 between charge and commit (PostgreSQL, reached directly or
    through PgBouncer in transaction mode, where a killed worker's server connection goes
    straight to another client): one charge, one key per run."""
    with reached(how, pg_url) as url:
        outcome = drive_scenario(POSTGRES_SCENARIO, tmp_path, url, launcher)
    assert len(outcome.kills) == POSTGRES_SCENARIO.kills + 1, summary([outcome])
    print(summary([outcome]))
