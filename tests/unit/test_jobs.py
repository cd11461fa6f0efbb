"""Each kind of process runs the periodic jobs ``bot.app.jobs`` documents, each once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app import jobs as jobs_module
from bot.app.jobs import DEV, SERVE, WORKER, WORKER_UNTIL_IDLE, Duty, jobs
from bot.app.settings import Settings
from bot.app.wiring import Services, build_services

PROCESSES = {
    "signoff serve": SERVE,
    "signoff serve --no-scheduler": frozenset[Duty](),
    "signoff worker": WORKER,
    "signoff worker --until-idle": WORKER_UNTIL_IDLE,
    "signoff dev": DEV,
}
JOB_LINE = re.compile(r"^ {4}(?:(?P<duty>\S+(?: \S+)*) {2,})? *(?P<job>[a-z-]+) {2,}")
PROCESS_LINE = re.compile(r"^ {4}(?P<process>signoff \S+(?: --[a-z-]+)?) {2,}(?P<duties>.*)$")


def documented() -> tuple[dict[Duty, list[str]], dict[str, frozenset[Duty]]]:
    """The module docstring's two tables: each duty's jobs, and each process's duties."""
    doc = jobs_module.__doc__ or ""
    duties_part, processes_part = doc.split("Which process does what:")
    by_duty: dict[Duty, list[str]] = {}
    duty: Duty | None = None
    for line in duties_part.splitlines():
        if found := JOB_LINE.match(line):
            duty = Duty(found["duty"]) if found["duty"] else duty
            assert duty is not None, line
            by_duty.setdefault(duty, []).append(found["job"])
    by_process: dict[str, frozenset[Duty]] = {}
    for line in processes_part.splitlines():
        if found := PROCESS_LINE.match(line):
            names = found["duties"].split(" (")[0]
            by_process[found["process"]] = frozenset(
                Duty(name) for name in names.split(", ") if name != "none"
            )
    return by_duty, by_process


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """Services over a SQLite file, with an audit anchor file so that every job exists."""
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'signoff.db'}",
        approvers=("U_APPROVER",),
        audit_anchor_file=str(tmp_path / "anchors.jsonl"),
    )
    built = build_services(settings)
    yield built
    built.shutdown()
    built.store.engine.dispose()


def test_the_docstring_lists_every_duty_and_process() -> None:
    """The docstring names each duty's jobs and the duties of each kind of process."""
    by_duty, by_process = documented()
    assert set(by_duty) == set(Duty)
    assert by_process == PROCESSES


@pytest.mark.parametrize("process", sorted(PROCESSES))
def test_each_process_runs_the_documented_jobs_once(services: Services, process: str) -> None:
    """A process's job list is the docstring's jobs of its duties, and no name is there twice."""
    by_duty, _ = documented()
    names = [job.name for job in jobs(services, PROCESSES[process])]
    expected = [name for duty in Duty if duty in PROCESSES[process] for name in by_duty[duty]]
    assert names == expected
    assert len(set(names)) == len(names)


def test_every_job_is_registered_for_one_duty_only(services: Services) -> None:
    """No job name belongs to two duties, so no process can schedule one twice."""
    names = [job.name for duty in Duty for job in jobs(services, frozenset({duty}))]
    assert len(set(names)) == len(names)


def test_the_audit_anchor_job_exists_only_with_an_anchor_file(tmp_path: Path) -> None:
    """Without ``SIGNOFF_AUDIT_ANCHOR_FILE`` the Slack duty has no audit-anchor job."""
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'signoff.db'}", approvers=("U_A",))
    built = build_services(settings)
    try:
        assert [job.name for job in jobs(built, SERVE)] == [
            "dispatch",
            "intake",
            "approvals",
            "webhooks",
        ]
    finally:
        built.shutdown()
        built.store.engine.dispose()
