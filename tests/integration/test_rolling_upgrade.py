"""During a rolling upgrade the old code runs on the schema a later release migrated: every
command starts on it, and ``db upgrade`` and ``doctor`` say what they see."""

from __future__ import annotations

import subprocess

import pytest
from sqlalchemy import Engine, text

from store import latest_revision, upgrade
from tests.integration import cli_ok, run_cli, signoff_command, signoff_env

LATER = "9999"
"""A revision no migration of this code has: a later release's."""


@pytest.fixture
def later_schema(empty_engine: Engine) -> str:
    """A database of its own migrated by this code, then marked as a later release left it."""
    upgrade(empty_engine)
    with empty_engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": LATER})
    return empty_engine.url.render_as_string(hide_password=False)


def test_the_old_code_runs_on_a_later_releases_schema(later_schema: str) -> None:
    """``runs``, ``start`` and a worker run on it (each stopped at start with Alembic's
    "Can't locate revision" before: an old pod restarted mid-rollout crash-looped)."""
    env = signoff_env(later_schema)
    assert cli_ok(env, "runs").strip() == "no runs"
    run_id = cli_ok(env, "start", "demo.trivial", "--input", '{"n": 2}').split()[-1]
    cli_ok(env, "worker", "--until-idle")
    assert "completed" in cli_ok(env, "show", run_id)


def test_db_upgrade_and_doctor_say_the_schema_is_a_later_releases(later_schema: str) -> None:
    """``db upgrade`` leaves a newer schema as it is and says so; doctor's database check
    passes, naming both revisions (it told the operator to run ``db upgrade``)."""
    env = signoff_env(later_schema)
    said = cli_ok(env, "db", "upgrade")
    assert said.strip() == (
        f"the database's schema ({LATER}) is newer than this code's ({latest_revision()}): "
        "nothing to do here (a later release migrated it)"
    )
    doctor = run_cli(env, "doctor")
    (line,) = [x for x in doctor.stdout.splitlines() if "database" in x]
    assert f"schema at {LATER} (a later release's: this code's is {latest_revision()})" in line
    assert "db upgrade" not in doctor.stdout


def test_two_upgrades_at_once_say_what_each_did(empty_engine: Engine) -> None:
    """Two ``db upgrade`` started together on an empty database: one migrates it and says
    so, the other waits and says it found it up to date (both said they upgraded it: the
    revision was read before the lock)."""
    url = empty_engine.url.render_as_string(hide_password=False)
    env = signoff_env(url)
    both = [
        subprocess.Popen(
            [*signoff_command(), "db", "upgrade"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    said = sorted(process.communicate(timeout=120)[0].strip() for process in both)
    assert [process.returncode for process in both] == [0, 0], said
    head = latest_revision()
    assert said == [
        f"database is up to date (schema at {head})",
        f"database upgraded from an empty database to {head}",
    ]
