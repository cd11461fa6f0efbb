"""``signoff prune`` and ``signoff import`` on real SQLite files and the real PostgreSQL.

Runs are made in this process on the database under test, with a clock frozen in the year
2000, so that they are old: only runs this module makes are ever that old, which keeps
the shared PostgreSQL database's other runs out of every prune here. The command line is
``bot.cli.main.main``, the function the ``signoff`` script calls.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete, insert, select, true

from agent_runtime import (
    Actor,
    Agent,
    AgentInput,
    ApprovalPolicy,
    ApprovalStatus,
    RetryPolicy,
    RunContext,
    RunId,
    RunStatus,
    Runtime,
    Tools,
    WorkerOptions,
    Workflows,
    tool,
)
from agent_runtime.deployment import Deployment
from agent_runtime.grant_service import Grants
from agent_runtime.grants import GrantScope
from agent_runtime.models import ScriptedModel, ToolCall, text_reply, tool_reply
from agent_runtime.notices import Delivery, Notice
from agent_runtime.testing import FrozenClock
from bot.cli.main import main
from store import SqlStore, open_store
from store import archive as archive_module
from store.api_store import RunDraft, SqlApiStore
from store.approval_store import SqlApprovalStore
from store.models import (
    api_approvals,
    approvals,
    attempts,
    audit_head,
    audit_log,
    events,
    grants,
    outbox,
    runs,
    steps,
)
from store.outbox import SqlOutbox

OLD = datetime(2000, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
"""When the old runs ran (microseconds included: they must survive the round trip)."""
CUTOFF = OLD + timedelta(days=1)
YOUNG = OLD + timedelta(days=10)
APPROVER = Actor(user_id="U_DANA", name="dana")
WORK = WorkerOptions(owner="archive-test", concurrency=32, lease_ttl=timedelta(seconds=30))


# --- the runs ---------------------------------------------------------------------------------


def _note(text: str) -> dict[str, str]:
    return {"note": text, "accent": "é"}


def two_steps(ctx: RunContext, input: Any) -> dict[str, Any]:
    """Two steps, then an answer."""
    first = ctx.step(_note, "one", name="first")
    second = ctx.step(_note, "two", name="second")
    return {"first": first, "second": second, "pi": 3.141592653589793}


def _explode() -> None:
    raise RuntimeError("the service said no")


def fails(ctx: RunContext, input: Any) -> None:
    """A step that fails twice, which fails the run."""
    ctx.step(
        _explode,
        name="explode",
        retry=RetryPolicy(max_attempts=2, initial_interval=timedelta(milliseconds=1)),
    )


def waits(ctx: RunContext, input: Any) -> Any:
    """A step, a wait for the event ``go``, a step."""
    ctx.step(_note, "before", name="before")
    data = ctx.wait_for("go")
    ctx.step(_note, "after", name="after")
    return data


def refund(order_id: str, idempotency_key: str) -> dict[str, str]:
    """Refund an order.

    Args:
        order_id: The order.
    """
    return {"refunded": order_id}


def _agent() -> Agent:
    policy = ApprovalPolicy(approvers=(APPROVER.user_id,))
    script = [
        tool_reply(ToolCall(id="c1", name="refund", arguments={"order_id": "1042"})),
        text_reply("refunded 1042"),
    ]
    return Agent(
        name="archivist",
        model=ScriptedModel(script, name="scripted"),
        system_prompt="refund carefully",
        tools=Tools(tool(side_effect=True, approval=policy)(refund)),
    )


@dataclass(frozen=True)
class Scene:
    """Runs in every state, on one database: which should go and which should stay."""

    store: SqlStore
    old: dict[str, RunId]
    """Finished before the cutoff, nothing left to deliver: prune removes them."""
    kept: dict[str, RunId]
    """Unfinished, younger than the cutoff, or with a notice to deliver: prune keeps them."""

    @property
    def engine(self) -> Engine:
        """The database's engine."""
        return self.store.engine

    @property
    def ids(self) -> list[RunId]:
        """Every run of the scene."""
        return [*self.old.values(), *self.kept.values()]


def build_scene(url: str) -> Scene:
    """Make a completed, a failed, a cancelled, an event-driven and an approved run in 2000,
    one waiting, one pending, one young and one whose last notice is not delivered yet."""
    store = open_store(url)
    clock = FrozenClock(OLD)
    agent = _agent()
    flows = Workflows()
    for name, fn in (
        ("archive.steps", two_steps),
        ("archive.fails", fails),
        ("archive.waits", waits),
    ):
        flows.add(name, fn)
    deployment = Deployment(
        store, SqlApprovalStore(store.engine), [agent], clock=clock, workflows=flows
    )
    service, runtime = deployment.approvals, deployment.runtime
    work = runtime.worker(WORK).run_once

    old = {
        "completed": runtime.start("archive.steps", {"n": 2}).id,
        "failed": runtime.start("archive.fails").id,
        "signalled": runtime.start("archive.waits").id,
        "cancelled": runtime.start("archive.waits").id,
        "approved": runtime.start(
            agent.workflow,
            AgentInput(task="refund order 1042", requester=Actor(user_id="U_REQ")).to_json(),
        ).id,
    }
    kept = {
        "waiting": runtime.start("archive.waits").id,
        "unsent": runtime.start("archive.steps").id,
    }
    work()
    clock.advance(timedelta(minutes=3, microseconds=7))
    runtime.signal(old["signalled"], "go", {"n": 1})
    runtime.cancel(old["cancelled"])
    SqlApiStore(store.engine).open_request(
        "archive-client",
        uuid.uuid4().hex,
        "0" * 64,
        RunDraft(run_id=old["cancelled"], workflow="archive.waits", input=None),
        None,
        OLD,
    )
    (approval,) = service.store.list_approvals(
        run_id=old["approved"], status=ApprovalStatus.PENDING
    )
    grants = Grants(service, clock)
    made = grants.approve_and_grant(
        approval.id, APPROVER, GrantScope.RUN, seen_hash=approval.args_hash
    )
    assert made.decision.accepted
    assert made.grant is not None
    work()
    _notify(SqlOutbox(store.engine), old["completed"], kept["unsent"])
    clock.advance(YOUNG - clock.now())
    kept["young"] = runtime.start("archive.steps").id
    work()
    kept["pending"] = Runtime(store, flows, clock=FrozenClock(OLD)).start("archive.steps").id
    scene = Scene(store=store, old=old, kept=kept)
    _check_states(scene)
    return scene


def _notify(box: SqlOutbox, delivered: RunId, undelivered: RunId) -> None:
    """Queue two notices in 2000: one is delivered to Slack, the other never is."""
    box.enqueue(
        [
            Notice(
                key=f"run:{delivered}:root",
                run_id=delivered,
                kind="run.root",
                data={"channel": "C1", "task": "two steps"},
            )
        ],
        OLD,
    )
    (item,) = box.claim_due("archive-test", now=OLD, until=OLD + timedelta(minutes=1), limit=1)
    box.delivered(item, Delivery(channel="C1", ts="946728000.000100"), OLD)
    box.enqueue(
        [
            Notice(
                key=f"run:{undelivered}:root",
                run_id=undelivered,
                kind="run.root",
                data={"channel": "C1"},
            )
        ],
        OLD,
    )


def _check_states(scene: Scene) -> None:
    expected = {
        "completed": RunStatus.COMPLETED,
        "failed": RunStatus.FAILED,
        "signalled": RunStatus.COMPLETED,
        "cancelled": RunStatus.CANCELLED,
        "approved": RunStatus.COMPLETED,
        "waiting": RunStatus.WAITING,
        "unsent": RunStatus.COMPLETED,
        "pending": RunStatus.PENDING,
        "young": RunStatus.COMPLETED,
    }
    found = {
        name: scene.store.get_run(run_id).status
        for name, run_id in {**scene.old, **scene.kept}.items()
    }
    assert found == expected


def rows_of(engine: Engine, ids: list[RunId]) -> dict[str, list[dict[str, Any]]]:
    """Every row the runs ``ids`` own, in each table, in primary key order."""
    found = {"runs": _select(engine, runs, runs.c.id.in_(ids))}
    for table in (steps, attempts, events, approvals, outbox, api_approvals, grants):
        found[table.name] = _select(engine, table, table.c.run_id.in_(ids))
    return found


def _select(engine: Engine, table: Any, where: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        query = select(table).where(where).order_by(*table.primary_key.columns)
        return [row._asdict() for row in conn.execute(query)]


def _forget(engine: Engine, ids: list[RunId]) -> None:
    """Delete the scene's runs and their rows (the journal's too: it has no key to runs to
    cascade from), so no later test sees them."""
    with engine.begin() as conn:
        conn.execute(delete(steps).where(steps.c.run_id.in_(ids)))
        conn.execute(delete(outbox).where(outbox.c.run_id.in_(ids)))
        conn.execute(delete(api_approvals).where(api_approvals.c.run_id.in_(ids)))
        conn.execute(delete(grants).where(grants.c.run_id.in_(ids)))
        conn.execute(delete(runs).where(runs.c.id.in_(ids)))


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest) -> str:
    """The database under test: a fresh SQLite file, or the session's PostgreSQL database."""
    return str(request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url"))


@pytest.fixture
def scene(url: str) -> Iterator[Scene]:
    """The runs of ``build_scene``, deleted again afterwards."""
    built = build_scene(url)
    yield built
    _forget(built.engine, built.ids)
    built.engine.dispose()


@dataclass(frozen=True)
class Cli:
    """``signoff`` in this process, on one database."""

    capsys: pytest.CaptureFixture[str]

    def __call__(self, *args: str) -> tuple[int, str, str]:
        """Run a command; return its exit status, stdout and stderr."""
        code = main(list(args))
        out, err = self.capsys.readouterr()
        return code, out, err

    def ok(self, *args: str) -> str:
        """Run a command that must succeed; return its stdout."""
        code, out, err = self(*args)
        assert code == 0, (args, code, err)
        return out

    def json(self, *args: str) -> Any:
        """Run a command with ``--json``; return what it printed."""
        return json.loads(self.ok(*args, "--json"))


@pytest.fixture
def cli(url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The command line on the database under test."""
    monkeypatch.setenv("SIGNOFF_DATABASE_URL", url)
    return Cli(capsys)


def older_than_cutoff() -> str:
    """``--older-than`` for a cutoff just after CUTOFF (a little later by the time it runs)."""
    return repr((datetime.now(UTC) - CUTOFF) / timedelta(days=1))


def prune(cli: Cli, *more: str) -> Any:
    """``signoff prune --older-than <days to CUTOFF> ... --json``."""
    return cli.json("prune", "--older-than", older_than_cutoff(), *more)


def views(cli: Cli, ids: list[RunId]) -> dict[str, str]:
    """What ``signoff show`` and ``signoff history`` print for each run, as JSON."""
    return {
        f"{command} {run_id}": cli.ok(command, run_id, "--json")
        for run_id in ids
        for command in ("show", "history")
    }


def audit(cli: Cli, engine: Engine) -> tuple[tuple[int, str], list[dict[str, Any]]]:
    """What ``signoff audit verify --json`` says (status, output), and the log's every row."""
    code, out, _ = cli("audit", "verify", "--json")
    rows = [*_select(engine, audit_log, true()), *_select(engine, audit_head, true())]
    return (code, out), rows


# --- the tests --------------------------------------------------------------------------------


def test_prune_removes_old_finished_runs_and_keeps_the_rest(scene: Scene, cli: Cli) -> None:
    """Old finished runs go with all their rows; waiting, young and unsent runs stay."""
    before = audit(cli, scene.engine)
    old_rows = rows_of(scene.engine, list(scene.old.values()))
    kept_rows = rows_of(scene.engine, list(scene.kept.values()))
    result = prune(cli)
    assert sorted(result["removed"]["ids"]) == sorted(scene.old.values())
    assert result["skipped"]["ids"] == [scene.kept["unsent"]]
    assert result["rows"] == {name: len(found) for name, found in old_rows.items()}
    assert min(result["rows"].values()) >= 1, "every kind of row was there to remove"
    assert rows_of(scene.engine, list(scene.old.values())) == {
        name: []
        for name in (
            "runs",
            "steps",
            "attempts",
            "events",
            "approvals",
            "outbox",
            "api_approvals",
            "grants",
        )
    }
    assert rows_of(scene.engine, list(scene.kept.values())) == kept_rows
    gone = scene.old["approved"]
    assert cli("show", gone)[::2] == (2, f"signoff: error: no run with id {gone}\n")
    after = audit(cli, scene.engine)
    assert after == before
    assert any(row["run_id"] == gone for row in after[1]), "the removed run's entries stay"
    if scene.engine.dialect.name == "sqlite":  # shared PostgreSQL: others may break it on purpose
        code, out = after[0]
        assert code == 0
        assert json.loads(out)["ok"]


def test_archive_then_import_restores_runs_exactly(scene: Scene, cli: Cli, tmp_path: Path) -> None:
    """After prune --archive and import, show/history print the same bytes, every row is equal."""
    ids = list(scene.old.values())
    printed, rows = views(cli, ids), rows_of(scene.engine, ids)
    archive = tmp_path / "runs.jsonl"
    assert prune(cli, "--archive", str(archive))["archive"] == str(archive)
    assert len(archive.read_text(encoding="ascii").splitlines()) == len(ids)
    restored = cli.json("import", str(archive))
    assert sorted(restored["imported"]["ids"]) == sorted(ids)
    assert restored["existing"]["ids"] == []
    assert views(cli, ids) == printed
    assert rows_of(scene.engine, ids) == rows


def test_importing_twice_changes_nothing(scene: Scene, cli: Cli, tmp_path: Path) -> None:
    """A second import of the same archive skips every run, reports them, and writes nothing."""
    ids = list(scene.old.values())
    archive = tmp_path / "runs.jsonl"
    prune(cli, "--archive", str(archive))
    cli.ok("import", str(archive))
    rows = rows_of(scene.engine, ids)
    again = cli.json("import", str(archive))
    assert again["imported"] == {"count": 0, "ids": []}
    assert sorted(again["existing"]["ids"]) == sorted(ids)
    assert rows_of(scene.engine, ids) == rows
    assert "skipped 5 runs already present:" in cli.ok("import", str(archive))


def test_malformed_line_is_refused_with_its_number_and_nothing_is_imported(
    scene: Scene, cli: Cli, tmp_path: Path
) -> None:
    """A line cut in the middle of an archive is named by number; no run of the file is imported."""
    ids = list(scene.old.values())
    archive = tmp_path / "runs.jsonl"
    prune(cli, "--archive", str(archive))
    lines = archive.read_text(encoding="ascii").splitlines(keepends=True)
    lines.insert(2, lines[2][: len(lines[2]) // 2] + "\n")
    archive.write_text("".join(lines), encoding="ascii")
    code, out, err = cli("import", str(archive))
    assert (code, out) == (2, "")
    assert err.startswith(f"signoff: error: line 3 of {archive}: not JSON: "), err
    assert rows_of(scene.engine, ids)["runs"] == []


def test_a_prune_cut_short_loses_nothing(scene: Scene, cli: Cli, tmp_path: Path) -> None:
    """After a prune cut short, a second prune and an import restore every run once."""
    ids = list(scene.old.values())
    rows = rows_of(scene.engine, ids)
    archive = tmp_path / "runs.jsonl"
    prune(cli, "--archive", str(archive))
    cli.ok("import", str(archive))  # as if the deletes had never committed
    with archive.open("a", encoding="ascii") as handle:
        handle.write('{"format":"signoff-archive","version":1,"run":{"id":"')  # torn write
    again = prune(cli, "--archive", str(archive))
    assert sorted(again["removed"]["ids"]) == sorted(ids)
    assert len(archive.read_text(encoding="ascii").splitlines()) == 2 * len(ids)
    restored = cli.json("import", str(archive))
    assert sorted(restored["imported"]["ids"]) == sorted(ids)
    assert rows_of(scene.engine, ids) == rows


def test_batches_remove_the_same_runs_as_one(scene: Scene, tmp_path: Path) -> None:
    """Pruning two runs per transaction walks past the kept run and archives each run once."""
    archive = tmp_path / "runs.jsonl"
    result = archive_module.prune(scene.engine, cutoff=CUTOFF, archive=archive, batch_size=2)
    assert sorted(result.removed) == sorted(scene.old.values())
    assert result.skipped == (scene.kept["unsent"],)
    assert sorted(found.run_id for _, found in archive_module.read_archive(archive)) == sorted(
        scene.old.values()
    )
    assert rows_of(scene.engine, list(scene.old.values()))["runs"] == []


def test_a_notice_whose_id_was_taken_is_restored_under_a_new_one(
    scene: Scene, cli: Cli, tmp_path: Path
) -> None:
    """A restored notice whose id was taken gets a new id; all else comes back as it was."""
    run_id = scene.old["completed"]
    (original,) = rows_of(scene.engine, [run_id])["outbox"]
    archive = tmp_path / "runs.jsonl"
    prune(cli, "--archive", str(archive))
    young = scene.kept["young"]
    intruder = original | {"key": f"intruder:{young}", "run_id": young}
    with scene.engine.begin() as conn:
        conn.execute(insert(outbox).values(intruder))
    cli.ok("import", str(archive))
    (restored,) = rows_of(scene.engine, [run_id])["outbox"]
    assert restored["id"] != original["id"]
    assert restored | {"id": original["id"]} == original
    assert rows_of(scene.engine, [young])["outbox"] == [intruder]


def test_dry_run_lists_the_runs_and_changes_nothing(scene: Scene, cli: Cli, tmp_path: Path) -> None:
    """--dry-run reports what would go, deletes nothing and writes no archive."""
    rows = rows_of(scene.engine, scene.ids)
    archive = tmp_path / "runs.jsonl"
    result = prune(cli, "--dry-run", "--archive", str(archive))
    assert result["dry_run"] is True
    assert sorted(result["removed"]["ids"]) == sorted(scene.old.values())
    assert result["rows"]["runs"] == 5
    text = cli.ok("prune", "--older-than", older_than_cutoff(), "--dry-run")
    assert text.startswith(
        "would remove 5 runs (19 steps, 2 attempts, 2 events, 1 approval, "
        "1 notice, 1 API request, 1 grant) last updated before 2000-01-02T"
    )
    assert {line.strip() for line in text.splitlines()[1:6]} == set(scene.old.values())
    assert f"  {scene.kept['unsent']}" in text.splitlines()
    assert rows_of(scene.engine, scene.ids) == rows
    assert not archive.exists()


@pytest.mark.parametrize("days", ["-1", "soon", "nan", "inf", "1e300"])
def test_older_than_must_be_a_number_of_days(days: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A negative, non-numeric or endless --older-than is a usage error (exit status 2)."""
    with pytest.raises(SystemExit) as exit_:
        main(["prune", "--older-than", days])
    assert exit_.value.code == 2
    assert "argument --older-than" in capsys.readouterr().err
