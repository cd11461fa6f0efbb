"""Inspect, fork and eval through the ``signoff`` command line, over recorded demo runs.

Twenty demo-agent runs are recorded once for the module against a real demo provider on
loopback (its ledger lists every request it received), with every refund and email
approved but one refund rejected (so that run never asks for its email). Eval and inspect
then run with the tools swapped for a tripwire that records any call, so "never executes a
side effect" is observed, not assumed.

Each command's exit status and output are proven by one ``signoff`` process; its other cases
run through the same entry point in the test's process, and workers that only move runs
along are processes forked from a warm launcher.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import Actor, AgentInput, ApprovalStatus, Decision, RunId, RunStatus
from agent_runtime.model_input import model_positions
from bot.app.wiring import Services
from tests.integration import run_cli
from tests.integration.agent_helpers import (
    APPROVER,
    REQUESTER,
    DemoProvider,
    agent_env,
    email_requests,
    refund_requests,
    services_for,
)
from tests.integration.eval_models import CHANGED_ORDER, TRIPWIRE_ENV
from tests.integration.in_process import Cli, InProcessCli
from tests.integration.worker_processes import (
    Launcher,
)

ORDERS = ("1042", "1043", "1044", "1045")
PHRASINGS = (
    "refund order {} and email the customer",
    "please refund order #{}",
    "order {}: refund it and notify the customer",
    "email the customer of order {} about the delay",
    "refund order {}, then tell the customer",
)
REJECTED = ("1043", 0)
"""The one recorded run whose refund was rejected."""
MODELS = "tests.integration.eval_models"


@dataclass
class Recorded:
    """The recorded runs and how to reach them."""

    env: dict[str, str]
    services: Services
    provider: DemoProvider
    runs: dict[tuple[str, int], RunId]
    tripwire: Path
    launcher: Launcher
    logs: Path

    def work(self, env: dict[str, str] | None = None) -> None:
        """Run ``signoff worker --until-idle`` (with ``env``, or the recording's)."""
        self.launcher.work(env or self.env, self.logs)

    def settle(self, env: dict[str, str], services: Services, run_ids: Iterable[RunId]) -> None:
        """Work the runs on ``env``'s database, approving what each asks, until none waits."""
        _settle(self.launcher, env, self.logs, services, run_ids)

    def tripwire_env(self) -> dict[str, str]:
        """The environment of a process whose demo tools fail (and log) when called."""
        return self.env | {
            "SIGNOFF_AGENT": f"{MODELS}:tripwire_agent",
            TRIPWIRE_ENV: str(self.tripwire),
        }


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, launcher: Launcher) -> Iterator[Recorded]:
    """Twenty completed demo runs on a SQLite file, one with a rejected refund."""
    directory = tmp_path_factory.mktemp("journal")
    with DemoProvider(directory) as provider:
        env = agent_env(f"sqlite:///{directory / 'signoff.db'}", provider.url)
        with services_for(env) as services:
            runs = {
                (order, n): _start(services, phrasing.format(order))
                for n, phrasing in enumerate(PHRASINGS)
                for order in ORDERS
            }
            _settle(launcher, env, directory, services, runs.values(), rejected=runs[REJECTED])
            for run_id in runs.values():
                assert services.runtime.get(run_id).status == RunStatus.COMPLETED
            tripwire = directory / "tripwire.log"
            yield Recorded(env, services, provider, runs, tripwire, launcher, directory)


def _start(services: Services, task: str) -> RunId:
    data = AgentInput(task=task, requester=Actor(user_id=REQUESTER)).to_json()
    return services.runtime.start("agent:demo", data).id


def _settle(
    launcher: Launcher,
    env: dict[str, str],
    logs: Path,
    services: Services,
    run_ids: Iterable[RunId],
    rejected: RunId | None = None,
) -> None:
    """Work the runs, deciding what each asks (its refund, then its email), until none waits."""
    decided = 1
    while decided:
        launcher.work(env, logs)
        decided = sum(_decide_all(services, r, reject=r == rejected) for r in run_ids)


def _decide_all(services: Services, run_id: RunId, *, reject: bool) -> int:
    pending = services.approvals.store.list_approvals(run_id=run_id, status=ApprovalStatus.PENDING)
    for approval in pending:
        refuse = reject and approval.tool == "issue_refund"
        result = services.approvals.decide(
            approval.id,
            Actor(user_id=APPROVER, name="dana"),
            Decision.REJECT if refuse else Decision.APPROVE,
            reason="over the refund limit" if refuse else None,
        )
        assert result.accepted, result.message
    return len(pending)


def _json(cli: Cli, env: dict[str, str], *args: str) -> Any:
    done = cli(env, *args, "--json")
    assert done.returncode == 0, (args, done.returncode, done.stderr)
    return json.loads(done.stdout)


def test_eval_reports_exactly_the_changed_runs(recorded: Recorded, tmp_path: Path) -> None:
    """A model changed for order 1045 diverges on exactly those refunds; all else agrees."""
    ledger = recorded.provider.ledger()
    report_file = tmp_path / "eval.html"
    report = _json(
        run_cli,
        recorded.tripwire_env(),
        "eval",
        *recorded.runs.values(),
        "--model",
        f"{MODELS}:changed_model",
        "--report",
        str(report_file),
        "--concurrency",
        "4",
    )
    assert [r["run_id"] for r in report["runs"]] == list(recorded.runs.values()), "in order"
    by_run = {r["run_id"]: r for r in report["runs"]}
    changed = {
        run_id
        for (order, n), run_id in recorded.runs.items()
        if order == CHANGED_ORDER and "refund" in PHRASINGS[n]
    }
    assert len(changed) == 4
    assert {run_id for run_id, r in by_run.items() if not r["agrees"]} == changed
    for run_id in changed:
        (divergence,) = by_run[run_id]["divergences"]
        assert (divergence["index"], divergence["tool"]) == (1, "issue_refund")
        assert (
            divergence["arguments"]["amount_cents"] * 2
            == divergence["recorded"]["arguments"]["amount_cents"]
        )
        assert by_run[run_id]["candidate"]["calls"][1]["result"].startswith("not replayed")
    summary = report["summary"]
    assert (summary["runs"], summary["agreeing"], summary["agreement_rate"]) == (20, 16, 0.8)
    assert summary["divergence_points"] == {"call 2: issue_refund": 4}
    assert not recorded.tripwire.exists(), recorded.tripwire.read_text()
    assert recorded.provider.ledger() == ledger
    html = report_file.read_text(encoding="utf-8")
    assert "<svg" in html
    assert "<script" not in html
    assert "http" not in html.split("<svg")[0]
    assert all(run_id in html for run_id in recorded.runs.values())


def test_eval_with_the_same_model_agrees_everywhere(
    recorded: Recorded, cli_here: InProcessCli
) -> None:
    """The unchanged model reproduces all twenty runs, the rejected refund included."""
    tripwire, runs = recorded.tripwire_env(), recorded.runs.values()
    report = _json(cli_here, tripwire, "eval", *runs, "--model", f"{MODELS}:same_model")
    assert report["summary"]["agreement_rate"] == 1.0
    assert all(r["same_calls"] and r["same_answer"] for r in report["runs"])
    rejected = next(r for r in report["runs"] if r["run_id"] == recorded.runs[REJECTED])
    assert "over the refund limit" in rejected["candidate"]["calls"][1]["result"]
    decisions = [c["decision"] for c in rejected["recorded"]["calls"]]
    assert [d and (d["status"], d["reason"]) for d in decisions] == [
        None,
        ("rejected", "over the refund limit"),
    ], "no email is asked after a rejected refund"
    assert [c["decision"] for c in rejected["candidate"]["calls"]] == decisions
    assert report["summary"]["token_delta"] == 0
    counts = report["summary"]["approvals"]
    assert counts["rejected_in_recording"] == 1
    assert counts["fields_from_signed"] == counts["recorded_fields_from_signed"] == 0
    assert not recorded.tripwire.exists()


def test_eval_can_stop_a_trajectory_at_its_divergence(
    recorded: Recorded, cli_here: InProcessCli
) -> None:
    """With --stop-at-divergence a changed run ends at its first unrecorded call."""
    run_id = recorded.runs[(CHANGED_ORDER, 0)]
    report = _json(
        cli_here,
        recorded.tripwire_env(),
        "eval",
        run_id,
        "--model",
        f"{MODELS}:changed_model",
        "--stop-at-divergence",
    )
    (only,) = report["runs"]
    assert only["candidate"]["ended"] == "diverged"
    assert only["candidate"]["answer"] is None
    assert [c["tool"] for c in only["candidate"]["calls"]] == ["lookup_order", "issue_refund"]


def test_inspect_rebuilds_each_model_input_and_runs_nothing(
    recorded: Recorded, cli_here: InProcessCli
) -> None:
    """Inspect at every model step of a run matches the recorded input hash; no tool runs."""
    run_id = recorded.runs[REJECTED]
    journal = recorded.services.runtime.journal(run_id)
    positions = model_positions(journal)
    tripwire = recorded.tripwire_env()
    seen = [_json(cli_here, tripwire, "inspect", run_id, "--step", str(p)) for p in positions]
    assert all(s["identical"] for s in seen)
    assert [s["recorded_input_hash"] for s in seen] == [journal[p].input_hash for p in positions]
    assert [len(s["tool_results"]) for s in seen] == [0, 1, 2]
    refused = seen[-1]["tool_results"][1]
    assert (refused["tool"], refused["is_error"]) == ("issue_refund", True)
    assert seen[-1]["used"]["model_calls"] == 2
    shown = run_cli(tripwire, "inspect", run_id, "--step", str(positions[-1]))
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "identical to the request sent" in text
    assert "over the refund limit" in text
    assert not recorded.tripwire.exists()


def test_inspect_of_a_step_that_is_not_a_model_call_is_refused(recorded: Recorded) -> None:
    """Inspect at a tool step exits 2 and names the model-call steps."""
    run_id = recorded.runs[("1042", 0)]
    done = run_cli(recorded.env, "inspect", run_id, "--step", "0")
    assert done.returncode == 2
    assert "model calls are at steps" in done.stderr


def test_fork_never_repeats_a_side_effect_of_its_prefix(
    recorded: Recorded, cli_here: InProcessCli
) -> None:
    """A fork at the final answer, replaced, adds nothing to the provider's ledger."""
    source = recorded.runs[("1042", 0)]
    journal = recorded.services.runtime.journal(source)
    at = model_positions(journal)[-1]
    ledger = recorded.provider.ledger()
    answer = {"message": {"role": "assistant", "content": "Refund and email done (forked)."}}
    output = json.dumps(answer)
    forked = _json(run_cli, recorded.env, "fork", source, "--at", str(at), "--output", output)
    assert (forked["forked_from"], forked["fork_at"]) == (source, at)
    recorded.work()
    ended = recorded.services.runtime.get(forked["id"])
    assert ended.status == RunStatus.COMPLETED
    assert ended.output["answer"] == "Refund and email done (forked)."
    assert recorded.provider.ledger() == ledger
    shown = _json(cli_here, recorded.env, "show", source)
    assert {"id": forked["id"], "at": at} in shown["forks"]


def test_fork_before_the_actions_asks_again_and_acts_once(
    recorded: Recorded, cli_here: InProcessCli
) -> None:
    """A fork at the refund's proposal asks again for the refund, then the email, and acts once."""
    source = recorded.runs[("1044", 0)]
    at = model_positions(recorded.services.runtime.journal(source))[1]
    ledger = recorded.provider.ledger()
    forked = RunId(_json(cli_here, recorded.env, "fork", source, "--at", str(at))["id"])
    recorded.work()
    assert recorded.services.runtime.get(forked).status == RunStatus.WAITING
    new = recorded.provider.ledger()[len(ledger) :]
    assert [(e["method"], e["path"]) for e in new] == [("GET", "/v1/orders/1044")], (
        "only the refund's preview read the order: the prefix's lookup was not made again"
    )
    recorded.settle(recorded.env, recorded.services, [forked])
    assert recorded.services.runtime.get(forked).status == RunStatus.COMPLETED
    entries = recorded.provider.ledger()
    assert len(refund_requests(entries, forked)) == len(email_requests(entries, forked)) == 1
    assert len(entries) == len(ledger) + 4, "two reads by the refund's preview, two actions"


def test_fork_under_another_model_is_refused_when_unknown(
    recorded: Recorded, cli_here: InProcessCli
) -> None:
    """An unknown model spec, or an agent run forked at a tool step, exits 2 and forks nothing."""
    source = recorded.runs[("1042", 1)]
    before = len(recorded.services.runtime.forks(source))
    bad_model = run_cli(recorded.env, "fork", source, "--at", "1", "--model", "nope:nothing")
    assert bad_model.returncode == 2
    assert "--model" in bad_model.stderr
    tool_step = cli_here(recorded.env, "fork", source, "--at", "0")
    assert tool_step.returncode == 2
    assert "can be forked at its model calls" in tool_step.stderr
    assert len(recorded.services.runtime.forks(source)) == before


@pytest.mark.postgres
def test_inspect_fork_and_eval_on_postgresql(
    recorded: Recorded, pg_url: str, cli_here: InProcessCli
) -> None:
    """On PostgreSQL (whose jsonb reorders keys) inspect, eval and fork behave the same."""
    env = agent_env(pg_url, recorded.provider.url)
    with services_for(env) as services:
        run_id = _start(services, PHRASINGS[0].format("1042"))
        recorded.settle(env, services, [run_id])
        journal = services.runtime.journal(run_id)
        ledger = recorded.provider.ledger()
        tripwire = env | {
            "SIGNOFF_AGENT": f"{MODELS}:tripwire_agent",
            TRIPWIRE_ENV: str(recorded.tripwire),
        }
        for position in model_positions(journal):
            inspected = _json(cli_here, tripwire, "inspect", run_id, "--step", str(position))
            assert inspected["identical"]
        report = _json(cli_here, tripwire, "eval", run_id, "--model", f"{MODELS}:same_model")
        assert report["summary"]["agreement_rate"] == 1.0
        answer = {"message": {"role": "assistant", "content": "forked on PostgreSQL"}}
        forked = _json(
            cli_here,
            env,
            "fork",
            run_id,
            "--at",
            str(model_positions(journal)[-1]),
            "--output",
            json.dumps(answer),
        )
        recorded.work(env)
        assert services.runtime.get(forked["id"]).output["answer"] == "forked on PostgreSQL"
        assert recorded.provider.ledger() == ledger
        assert not recorded.tripwire.exists()


def test_eval_and_fork_under_another_agent(recorded: Recorded, cli_here: InProcessCli) -> None:
    """--agent evaluates and continues runs under another prompt (same tools, shared safely)."""
    env = recorded.env | {"SIGNOFF_AGENT": f"{MODELS}:terse_agent"}
    runs = [recorded.runs[("1042", 0)], recorded.runs[REJECTED]]
    ledger = recorded.provider.ledger()
    report = _json(cli_here, env, "eval", *runs, "--agent", "demo-terse")
    assert report["summary"]["agreement_rate"] == 1.0
    assert report["summary"]["candidate"] == "demo-terse"
    source = runs[0]
    at = model_positions(recorded.services.runtime.journal(source))[-1]
    forked = _json(cli_here, env, "fork", source, "--at", str(at), "--agent", "demo-terse")
    assert forked["workflow"] == "agent:demo-terse"
    recorded.work(env)
    shown = _json(cli_here, env, "show", forked["id"])
    assert shown["status"] == "completed", shown["error"]
    inspected = _json(cli_here, env, "inspect", forked["id"], "--step", str(at))
    assert inspected["request"]["system"].startswith("Be brief. ")
    assert inspected["identical"]
    recorded_hash = recorded.services.runtime.journal(source)[at].input_hash
    assert shown["steps"][at]["input_hash"] == inspected["input_hash"] != recorded_hash
    assert recorded.provider.ledger() == ledger


def test_agents_may_share_a_tool_name_only_for_the_same_tool(recorded: Recorded) -> None:
    """An agent redefining a shared tool without its approval policy is refused at start."""
    env = recorded.env | {"SIGNOFF_AGENT": f"{MODELS}:unguarded_agent"}
    done = run_cli(env, "approvals")
    assert done.returncode == 2
    assert "two agents define different tools named 'issue_refund'" in done.stderr
