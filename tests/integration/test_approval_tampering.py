"""Approvals under attack: tampered arguments, forged decisions, outsiders, races, edited logs.

Every test drives the demo agent with ``signoff worker`` processes (forked from a warm
launcher, one a test runs from the ``signoff`` script) against a real demo provider on
loopback (one for the module; each run's requests carry keys naming the run), and tampers the
way an attacker with a shell or database access would: raw SQL on the approvals, events and
audit tables; a forged decision event (``signoff signal`` refuses decision keys, so it is
written below the runtime, straight into the store); ``signoff approve`` as the wrong person;
and many ``signoff approve``/``reject`` processes racing. Where a command's exit status and
output are proven by one ``signoff`` process, its other cases run through the same entry
point in this process.

Three tests here first failed on product bugs, fixed since (commit 55288fb): a forged
decision event made the real decision fail and, at its deadline, every worker exit 2; a
run could spend another run's approval; ``signoff signal`` accepted decision keys.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, delete, insert, select, text, update

from agent_runtime import Actor, Approval, ApprovalStatus, Decision, RunId, RunStatus
from agent_runtime.approvals import args_hash
from agent_runtime.audit import shard_of
from agent_runtime.audit_report import examine
from bot.app.wiring import Services
from store import SqlStore
from store.models import approvals, audit_log, events
from tests.integration import run_cli, wait_until
from tests.integration.agent_helpers import (
    APPROVER,
    OUTSIDER,
    REQUESTER,
    DemoProvider,
    agent_env,
    named,
    refund_requests,
    services_for,
    start_demo_run,
)
from tests.integration.in_process import Cli, InProcessCli
from tests.integration.worker_processes import (
    Launcher,
)

APPROVED_ARGS = {"order_id": "1042", "amount_cents": 4999}
"""What the demo model proposes, and what the approver approves."""
OTHER_ARGS = {"order_id": "1045", "amount_cents": 89900}
"""What the attacker wants run instead: someone else's much larger order."""
RACERS = 6


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoProvider]:
    """One demo provider for the module."""
    with DemoProvider(tmp_path_factory.mktemp("provider")) as running:
        yield running


@dataclass(frozen=True)
class Workers:
    """Runs ``signoff worker --until-idle`` processes forked from the launcher, logging in
    ``logs``."""

    launcher: Launcher
    logs: Path

    def work(self, env: dict[str, str]) -> None:
        """Run ``signoff worker --until-idle`` with ``env``; require exit status 0."""
        self.launcher.work(env, self.logs)


@pytest.fixture
def workers(launcher: Launcher, tmp_path: Path) -> Workers:
    """Worker processes forked from the session's launcher, logging in the test's directory."""
    return Workers(launcher, tmp_path)


@dataclass
class Setup:
    """A demo run parked on its refund's approval (its email is asked once the refund is
    done), and how to reach it."""

    env: dict[str, str]
    services: Services
    provider: DemoProvider
    workers: Workers
    run_id: RunId
    refund: str

    def conn(self) -> Any:
        """A transaction on the run's database, for raw SQL."""
        return self.services.store.engine.begin()

    def work(self) -> None:
        """Run ``signoff worker --until-idle``."""
        self.workers.work(self.env)

    def approve(self, approval: str) -> None:
        """Approve through the service, as the approver."""
        result = self.services.approvals.decide(approval, Actor(user_id=APPROVER), Decision.APPROVE)
        assert result.accepted, result.message

    def email(self) -> str:
        """The email's approval, asked once the refund is done."""
        run = self.services.runtime.get(self.run_id)
        assert (run.status, run.wait_key) == (
            RunStatus.WAITING,
            _key(self.run_id, self.services, "send_email"),
        )
        return _approval(self.run_id, self.services, "send_email")

    def charges(self) -> list[dict[str, Any]]:
        """The charges the provider created for this run."""
        return [
            e for e in refund_requests(self.provider.ledger(), self.run_id) if e["created_charge"]
        ]


@pytest.fixture
def parked(sqlite_url: str, provider: DemoProvider, workers: Workers) -> Iterator[Setup]:
    """A demo run on SQLite, waiting for the approval of its refund.

    The requester is on the approvers' list too: the policy still keeps them from
    approving their own request.
    """
    env = agent_env(sqlite_url, provider.url, approvers=f"{APPROVER},{REQUESTER}")
    with services_for(env) as services:
        yield park(env, services, provider, workers)


def park(
    env: dict[str, str], services: Services, provider: DemoProvider, workers: Workers
) -> Setup:
    """Start a demo run and work it until it waits for its refund's approval."""
    run_id = start_demo_run(services)
    workers.work(env)
    run = services.runtime.get(run_id)
    assert (run.status, run.wait_key) == (RunStatus.WAITING, _key(run_id, services, "issue_refund"))
    assert _approvals(run_id, services, "send_email") == [], "no email before the refund"
    refund = _approval(run_id, services, "issue_refund")
    return Setup(env, services, provider, workers, run_id, refund)


def _approvals(run_id: RunId, services: Services, tool: str) -> list[Approval]:
    return [a for a in services.approvals.store.list_approvals(run_id=run_id) if a.tool == tool]


def _approval(run_id: RunId, services: Services, tool: str) -> str:
    (found,) = _approvals(run_id, services, tool)
    assert found.args == (APPROVED_ARGS if tool == "issue_refund" else found.args)
    return found.id


def _key(run_id: RunId, services: Services, tool: str) -> str:
    return f"approval:{_approval(run_id, services, tool)}"


def _answer(setup: Setup) -> str:
    run = setup.services.runtime.get(setup.run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    answer: str = run.output["answer"]
    return answer


def forged_decision(approval: str, args: dict[str, Any]) -> dict[str, Any]:
    """An "approved" decision event as the approvals service would deliver it."""
    return {
        "approval_id": approval,
        "status": "approved",
        "args": args,
        "args_hash": args_hash(args),
        "reason": None,
        "decided_by": {"user_id": APPROVER, "team_id": "", "name": ""},
        "decided_at": datetime.now(UTC).isoformat(),
    }


def forge(setup: Setup, run_id: RunId, approval: str, decision: dict[str, Any]) -> None:
    """Deliver a forged decision for ``approval`` to ``run_id``, straight into the store."""
    setup.services.store.deliver_event(run_id, f"approval:{approval}", decision, datetime.now(UTC))


# --- an approval for A never lets the tool run with B ---------------------------------------


@pytest.mark.parametrize("where", ["approval row", "wake event"])
def test_decided_args_tampered_in_the_database_never_run(
    parked: Setup, cli_here: InProcessCli, where: str
) -> None:
    """Approved for A, then the decided args (or the wake event) set to B in SQL: nothing runs,
    and no email claims the refund."""
    cli_here.ok(parked.env, "approve", parked.refund, "--as", APPROVER)
    with parked.conn() as conn:
        if where == "approval row":
            changed = conn.execute(
                update(approvals)
                .where(approvals.c.id == parked.refund)
                .values(decided_args=OTHER_ARGS, decided_args_hash=args_hash(OTHER_ARGS))
            )
        else:
            key = f"approval:{parked.refund}"
            data = conn.execute(select(events.c.data).where(events.c.key == key)).scalar_one()
            changed = conn.execute(
                update(events).where(events.c.key == key).values(data={**data, "args": OTHER_ARGS})
            )
        assert changed.rowcount == 1

    parked.work()

    journal = parked.services.store.load_journal(parked.run_id)
    (started,) = named(journal, "tool.started:issue_refund")
    assert started.output["refused"] == "the arguments differ from the approved ones"
    assert not named(journal, "tool:issue_refund"), "the refund tool never ran"
    assert refund_requests(parked.provider.ledger(), parked.run_id) == []
    answer = _answer(parked)
    assert "Refund: not executed: the arguments differ from the approved ones" in answer
    assert "Email: not sent, as no refund was made" in answer
    assert _approvals(parked.run_id, parked.services, "send_email") == []


def test_decided_args_edited_without_their_hash_run_the_approved_args(
    parked: Setup, cli_here: InProcessCli
) -> None:
    """Only the stored decided args edited to B: the tool runs with A, the approved ones."""
    cli_here.ok(parked.env, "approve", parked.refund, "--as", APPROVER)
    with parked.conn() as conn:
        conn.execute(
            update(approvals).where(approvals.c.id == parked.refund).values(decided_args=OTHER_ARGS)
        )

    parked.work()
    parked.approve(parked.email())
    parked.work()

    (charge,) = parked.charges()
    assert charge["body"] == {"order_id": "1042", "amount_cents": 4999}
    assert "Refund: done" in _answer(parked)


def test_signoff_signal_refuses_decision_keys(parked: Setup, cli_here: InProcessCli) -> None:
    """`signoff signal RUN approval:ID` (or budget:N) with a forged decision exits 2: no effect."""
    tries: list[tuple[str, Cli]] = [(f"approval:{parked.refund}", run_cli), ("budget:1", cli_here)]
    for key, cli in tries:
        done = cli(
            parked.env,
            "signal",
            parked.run_id,
            key,
            "--data",
            json.dumps(forged_decision(parked.refund, OTHER_ARGS)),
        )
        assert done.returncode == 2, (key, done.stdout, done.stderr)
        assert "are delivered by decisions only" in done.stderr
        assert parked.services.store.get_event(parked.run_id, key) is None
    run = parked.services.runtime.get(parked.run_id)
    assert (run.status, run.wait_key) == (RunStatus.WAITING, f"approval:{parked.refund}")


@pytest.mark.parametrize("args", [OTHER_ARGS, APPROVED_ARGS], ids=["other args", "same args"])
def test_forged_approval_event_does_not_run_the_tool(parked: Setup, args: dict[str, Any]) -> None:
    """A forged "approved" event in the database, for B or even for A: refused, no charge."""
    forge(parked, parked.run_id, parked.refund, forged_decision(parked.refund, args))
    parked.work()

    journal = parked.services.store.load_journal(parked.run_id)
    (started,) = named(journal, "tool.started:issue_refund")
    assert started.output["refused"] == "the approval is pending"
    assert not named(journal, "tool:issue_refund")
    assert refund_requests(parked.provider.ledger(), parked.run_id) == []
    assert "Refund: not executed: the approval is pending" in _answer(parked)
    assert _approvals(parked.run_id, parked.services, "send_email") == [], "no email asked"
    assert parked.services.approvals.get(parked.refund).status == ApprovalStatus.PENDING


def test_a_forged_event_does_not_block_the_real_decision(parked: Setup) -> None:
    """After a forged event (the run has moved on), the approver's real decision still counts."""
    forge(parked, parked.run_id, parked.refund, forged_decision(parked.refund, OTHER_ARGS))
    parked.work()  # the run moves on (refund refused) and ends without asking for the email

    decided = run_cli(parked.env, "reject", parked.refund, "--as", APPROVER, "--reason", "forged")

    assert decided.returncode == 0, decided.stderr
    assert decided.stdout.strip() == f"rejected by {APPROVER}"
    assert parked.services.approvals.get(parked.refund).status == ApprovalStatus.REJECTED
    # the forged event made the run try the refund at once, while its approval was pending
    assert "Refund: not executed: the approval is pending" in _answer(parked)


LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


def test_a_forged_event_does_not_stop_the_workers_at_the_deadline(parked: Setup) -> None:
    """After a forged event, the approval's deadline passing expires it; a `signoff worker`
    process keeps working and exits 0."""
    forge(parked, parked.run_id, parked.refund, forged_decision(parked.refund, OTHER_ARGS))
    parked.work()  # the run moves on (refund refused) and ends without asking for the email
    with parked.conn() as conn:  # four hours pass for the refund's approval
        conn.execute(
            update(approvals)
            .where(approvals.c.id == parked.refund)
            .values(deadline=LONG_AGO, next_due_at=LONG_AGO)
        )

    worker = run_cli(parked.env, "worker", "--until-idle")

    assert worker.returncode == 0, worker.stderr
    assert parked.services.approvals.get(parked.refund).status == ApprovalStatus.EXPIRED
    answer = _answer(parked)
    assert "Refund: not executed: the approval is pending" in answer  # tried on the forgery
    assert "Email: not sent, as no refund was made" in answer
    assert refund_requests(parked.provider.ledger(), parked.run_id) == []


def test_an_approval_cannot_be_spent_by_another_run(parked: Setup) -> None:
    """Run A's approved refund forged into run B's wake event: refused, one charge in all."""
    other = park(parked.env, parked.services, parked.provider, parked.workers)
    parked.approve(parked.refund)
    forge(parked, other.run_id, other.refund, forged_decision(parked.refund, APPROVED_ARGS))
    parked.work()
    parked.approve(parked.email())  # only the run whose refund was made asks for its email
    parked.work()

    journal = other.services.store.load_journal(other.run_id)
    (started,) = named(journal, "tool.started:issue_refund")
    assert started.output["refused"] == "the approval was given for another call"
    assert "Refund: not executed: the approval was given for another call" in _answer(other)
    assert other.services.approvals.get(other.refund).status == ApprovalStatus.PENDING
    ledger = parked.provider.ledger()
    assert refund_requests(ledger, other.run_id) == []
    assert [e["created_charge"] for e in refund_requests(ledger, parked.run_id)] == [True]
    assert "Refund: done" in _answer(parked)


# --- deciders outside the policy ------------------------------------------------------------


def test_decisions_by_people_outside_the_policy_change_nothing(
    parked: Setup, cli_here: InProcessCli
) -> None:
    """An outsider's approve/reject and the requester's own approve exit 1 and change nothing."""
    attempts: list[tuple[Cli, str, str, str]] = [
        (run_cli, "approve", OUTSIDER, "you are not allowed to decide this approval"),
        (cli_here, "reject", OUTSIDER, "you are not allowed to decide this approval"),
        (cli_here, "approve", REQUESTER, "you asked for this action, so someone else must decide"),
    ]
    for cli, verb, who, message in attempts:
        extra = ["--reason", "no"] if verb == "reject" else []
        done = cli(parked.env, verb, parked.refund, "--as", who, *extra, "--json")
        assert done.returncode == 1, (verb, who, done.stdout, done.stderr)
        answer = json.loads(done.stdout)
        assert (answer["accepted"], answer["message"]) == (False, message)
        assert answer["approval"]["status"] == "pending"

    approval = parked.services.approvals.get(parked.refund)
    assert (approval.status, approval.version, approval.approvals) == (
        ApprovalStatus.PENDING,
        0,
        (),
    )
    entries, _ = parked.services.approvals.store.audit_log()
    mine = [
        (e.action, (e.actor or {}).get("user_id"))
        for e in entries
        if e.approval_id == parked.refund
    ]
    assert mine == [
        ("requested", REQUESTER),
        ("unauthorized", OUTSIDER),
        ("unauthorized", OUTSIDER),
        ("unauthorized", REQUESTER),
    ]
    assert parked.services.store.get_event(parked.run_id, f"approval:{parked.refund}") is None
    parked.work()
    assert parked.services.runtime.get(parked.run_id).status == RunStatus.WAITING
    assert refund_requests(parked.provider.ledger(), parked.run_id) == []


# --- racing decisions -----------------------------------------------------------------------


def race(env: dict[str, str], approval: str, directory: Path) -> list[tuple[str, int, str]]:
    """Start RACERS processes deciding ``approval`` at once; return (user, exit, message) each.

    Each process imports the CLI and builds its services, says it is ready, waits for the
    barrier file and then runs ``signoff approve``/``reject`` (even/odd racers) through
    ``bot.cli.main.main`` with those services, so all their decisions hit the database together.
    """
    barrier = directory / f"go-{approval}"
    racers = []
    try:
        for i in range(RACERS):
            user = f"U_RACER{i}"
            verb = ["approve"] if i % 2 == 0 else ["reject", "--reason", f"no, says {user}"]
            command = [
                sys.executable,
                "-m",
                "tests.integration.worker_processes",
                str(barrier),
                verb[0],
                approval,
                *verb[1:],
                "--as",
                user,
                "--json",
            ]
            racers.append(
                (
                    user,
                    subprocess.Popen(
                        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                    ),
                )
            )
        wait_until(
            lambda: len(list(directory.glob(f"go-{approval}.ready.*"))) == RACERS,
            timeout=60,
            what="every racer to be ready",
        )
        barrier.write_text("go", encoding="utf-8")
        results = []
        for user, process in racers:
            out, err = process.communicate(timeout=60)
            assert process.returncode in (0, 1), err
            results.append((user, process.returncode, json.loads(out)["message"]))
        return results
    finally:
        for _, process in racers:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.postgres
def test_concurrent_decisions_from_many_processes_exactly_one_wins(
    tmp_path: Path, pg_url: str, pg_store: SqlStore, provider: DemoProvider, workers: Workers
) -> None:
    """6 processes approve/reject one approval at once on PostgreSQL: one wins, 5 are told who."""
    approvers = ",".join(f"U_RACER{i}" for i in range(RACERS))
    env = agent_env(pg_url, provider.url, approvers=approvers)
    with services_for(env) as services:
        setup = park(env, services, provider, workers)
        for approval in (setup.refund,):
            results = race(env, approval, tmp_path)
            winners = [(user, message) for user, code, message in results if code == 0]
            assert len(winners) == 1, results
            (winner, message), decided = winners[0], services.approvals.get(approval)
            assert decided.decided_by is not None
            assert decided.decided_by.user_id == winner
            verdict = decided.status.value
            assert message == f"{verdict} by {winner}"
            for user, code, told in results:
                if user != winner:
                    assert code == 1
                    assert told.startswith(f"already {verdict} by {winner} at "), told
            entries, _ = services.approvals.store.audit_log()
            attempts = [e for e in entries if e.approval_id == approval and e.action != "requested"]
            spread = max(e.at for e in attempts) - min(e.at for e in attempts)
            print(f"{RACERS} decisions within {spread.total_seconds() * 1000:.0f} ms")
            actions = sorted(e.action for e in entries if e.approval_id == approval)
            decisions = [a for a in actions if a in ("approve", "reject")]
            assert len(decisions) == 1, actions
            assert actions.count("late") == RACERS - 1, actions
            with services.store.engine.connect() as conn:
                wakes = conn.execute(
                    select(events).where(events.c.key == f"approval:{approval}")
                ).all()
            assert len(wakes) == 1
            assert wakes[0].data["status"] == verdict

        setup.work()
        if verdict == "approved":  # the email is asked once the refund is done
            assert services.approvals.decide(
                setup.email(), Actor(user_id="U_RACER1"), Decision.APPROVE
            ).accepted
            setup.work()
        refunds = refund_requests(provider.ledger(), setup.run_id)
        expected = 1 if verdict == "approved" else 0
        assert sum(1 for e in refunds if e["created_charge"]) == expected
        run = services.runtime.get(setup.run_id)
        assert run.status == RunStatus.COMPLETED, run.error


# --- the audit log --------------------------------------------------------------------------


def _verify(cli: Cli, env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = cli(env, "audit", "verify", "--json")
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def intact(services: Services) -> bool:
    """Check the chain in this process, as ``signoff audit verify`` does."""
    return examine(*services.approvals.store.audit_log()).ok


def _row(conn: Connection, seq: int) -> dict[str, Any]:
    return dict(conn.execute(select(audit_log).where(audit_log.c.seq == seq)).one()._mapping)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_audit_verify_catches_edited_and_deleted_entries(
    backend: str,
    request: pytest.FixtureRequest,
    provider: DemoProvider,
    workers: Workers,
    cli_here: InProcessCli,
) -> None:
    """`signoff audit verify` exits 0 on the intact log, 1 after any entry is edited or deleted
    (a process on the intact and the edited log, this process's command line after a delete)."""
    if backend == "sqlite":
        url: str = request.getfixturevalue("sqlite_url")
    else:
        request.getfixturevalue("pg_store")
        url = request.getfixturevalue("pg_url")
    env = agent_env(url, provider.url)
    with services_for(env) as services:
        setup = park(env, services, provider, workers)
        decide = services.approvals.decide
        assert not decide(setup.refund, Actor(user_id=OUTSIDER), Decision.APPROVE).accepted
        assert decide(setup.refund, Actor(user_id=APPROVER), Decision.APPROVE).accepted
        setup.work()  # the refund runs; the email is asked
        assert decide(
            setup.email(), Actor(user_id=APPROVER), Decision.REJECT, reason="we call instead"
        ).accepted
        engine = services.store.engine
        shard = f"shard {shard_of(setup.run_id)}"

        code, report = _verify(run_cli, env)
        assert (code, report["ok"], report["entries"], report["problems"]) == (0, True, 5, [])

        with engine.begin() as conn:  # an outsider's refused attempt rewritten as an approval
            conn.execute(text("UPDATE audit_log SET action = 'approve' WHERE seq = 2"))
        code, report = _verify(run_cli, env)
        assert (code, report["problems"]) == (
            1,
            [f"{shard}: entry 2 was altered after it was written"],
        )
        with engine.begin() as conn:
            conn.execute(text("UPDATE audit_log SET action = 'unauthorized' WHERE seq = 2"))
        assert intact(services), "restored, the log is intact again"

        with engine.begin() as conn:  # the record of who approved, deleted
            kept = _row(conn, 3)
            conn.execute(text("DELETE FROM audit_log WHERE seq = 3"))
        code, report = _verify(cli_here, env)
        assert code == 1
        assert f"{shard}: entry 3 is missing (next is 4)" in report["problems"]
        with engine.begin() as conn:
            conn.execute(insert(audit_log).values(**kept))
        assert intact(services), "restored, the log is intact again"

        with engine.begin() as conn:  # the last entry deleted: only the head tells
            conn.execute(delete(audit_log).where(audit_log.c.seq == 5))
        code, report = _verify(cli_here, env)
        assert (code, report["problems"]) == (
            1,
            [f"{shard}: the log ends at entry 4 but its head is entry 5"],
        )
