"""``signoff doctor`` against the local Slack Web API and real database files, as a subprocess."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import psycopg
import pytest
from sqlalchemy import make_url

from bench._common import scratch_database
from bench.decisions import pg_url
from bot.slack.scopes import BOT_SCOPES
from devkit.sandbox.slack_api import DEFAULT_TOKEN, RunningSlackApi, Workspace, start_slack_api
from tests.integration import cli_ok, run_cli, signoff_env, wait_until


@pytest.fixture
def slack() -> Iterator[RunningSlackApi]:
    """A local Slack whose token has every scope Signoff asks for."""
    running = start_slack_api(Workspace())
    yield running
    running.stop()


def doctor_env(database_url: str, slack: RunningSlackApi, **extra: str) -> dict[str, str]:
    """The environment of a well-configured Signoff pointed at ``slack``."""
    return signoff_env(
        database_url,
        extra={
            "SLACK_BOT_TOKEN": DEFAULT_TOKEN,
            "SLACK_SIGNING_SECRET": "s" * 32,
            "SIGNOFF_APPROVERS": "U_DANA",
            "SIGNOFF_SLACK_API_URL": slack.api_url,
            **extra,
        },
    )


def test_a_good_configuration_passes_every_check(sqlite_url: str, slack: RunningSlackApi) -> None:
    """Token, scopes, secret, migrated database, approvers, channel membership: all ok."""
    env = doctor_env(sqlite_url, slack)
    cli_ok(env, "db", "upgrade")
    channel = slack.workspace.resolve_channel("general").id
    lines = cli_ok(env, "doctor", "--channel", channel).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "ok    signing secret",
        "ok    database",
        "ok    approvers",
        "ok    models",
        "ok    slack token",
        "ok    scopes",
        "ok    channel",
    ]


def test_each_misconfiguration_is_named_with_its_fix(sqlite_url: str, tmp_path: Path) -> None:
    """No secret, an unmigrated database, a missing scope, an unknown channel: exit 1."""
    slack = start_slack_api(Workspace(), scopes=[s for s in BOT_SCOPES if s != "im:history"])
    try:
        env = doctor_env(sqlite_url, slack, SLACK_SIGNING_SECRET="")
        done = run_cli(env, "doctor", "--channel", "C_NOWHERE")
    finally:
        slack.stop()
    assert done.returncode == 1
    failed = {
        line.split(":")[0].removeprefix("FAIL  "): line
        for line in done.stdout.splitlines()
        if line.startswith("FAIL")
    }
    assert sorted(failed) == ["channel", "database", "scopes", "signing secret"]
    assert "run `signoff db upgrade`" in failed["database"]
    assert "missing im:history" in failed["scopes"]
    assert "channel_not_found" in failed["channel"]


def test_an_agent_whose_model_cannot_be_built_fails_the_models_check(
    sqlite_url: str, slack: RunningSlackApi
) -> None:
    """An agent on ``openai:`` with no API key in the environment fails the models check with
    the variable to set, as ``signoff worker`` would at start."""
    env = doctor_env(sqlite_url, slack, SIGNOFF_AGENT="examples.refund_agent:support")
    for key in ("OPENAI_API_KEY", "SIGNOFF_MODEL_API_KEY"):
        env.pop(key, None)
    cli_ok(env, "db", "upgrade")
    done = run_cli(env, "doctor")
    assert done.returncode == 1
    assert (
        "FAIL  models: agent 'support': openai:gpt-4o-mini needs an API key: set OPENAI_API_KEY"
        " (or SIGNOFF_MODEL_API_KEY with SIGNOFF_MODEL_PROVIDER)"
    ) in done.stdout.splitlines()
    with_key = run_cli({**env, "OPENAI_API_KEY": "sk-test"}, "doctor")
    assert "ok    models: every agent's model can be built" in with_key.stdout.splitlines()


def test_a_model_factory_failing_its_own_way_fails_the_models_check_in_one_line(
    sqlite_url: str, slack: RunningSlackApi, tmp_path: Path
) -> None:
    """A ``module:attribute`` model whose factory raises (a variable of its own unset) fails
    the models check with the error, and the Slack checks after it still run."""
    (tmp_path / "failing_models.py").write_text(
        "import os\n\n\ndef make():\n    return os.environ['MY_MODEL_KEY']\n"
    )
    (tmp_path / "failing_agent.py").write_text(
        "from dataclasses import replace\n\nfrom agent_runtime.agent import Budget\n"
        "from examples.refund_agent import support\n\n"
        "agent = replace(support, model='failing_models:make', budget=Budget())\n"
    )
    env = doctor_env(sqlite_url, slack, SIGNOFF_AGENT="failing_agent:agent")
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    cli_ok(env, "db", "upgrade")
    done = run_cli(env, "doctor", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert "FAIL  models: building a model failed: KeyError: 'MY_MODEL_KEY'" in lines
    assert lines[-1].startswith("ok    scopes")


def test_a_revoked_token_is_reported(sqlite_url: str, slack: RunningSlackApi) -> None:
    """A token Slack does not accept fails the token check, with Slack's error."""
    env = doctor_env(sqlite_url, slack, SLACK_BOT_TOKEN="xoxb-revoked")
    cli_ok(env, "db", "upgrade")
    done = run_cli(env, "doctor")
    assert done.returncode == 1
    assert "FAIL  slack token: Slack answered invalid_auth" in done.stdout.splitlines()


def test_a_channel_the_bot_has_not_joined_is_named_with_the_invite(
    sqlite_url: str, slack: RunningSlackApi
) -> None:
    """``--channel`` of a channel without the bot fails with how to invite it."""
    env = doctor_env(sqlite_url, slack)
    cli_ok(env, "db", "upgrade")
    channel = slack.workspace.add_channel("ops").id
    done = run_cli(env, "doctor", "--channel", channel)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1] == (
        "FAIL  channel: the bot is not in #ops: type /invite @Signoff there"
    )


def test_tables_the_planner_takes_for_empty_are_named_until_analyzed(
    pg_server_url: str, slack: RunningSlackApi
) -> None:
    """On PostgreSQL, a table whose rows came after its statistics (autovacuum off) fails the
    planner statistics check, named with its row count and the fix; ANALYZE clears it."""
    admin = make_url(pg_server_url).set(drivername="postgresql")
    with scratch_database(admin.render_as_string(hide_password=False), "signoff_doctor") as dsn:
        env = doctor_env(pg_url(dsn), slack)
        cli_ok(env, "db", "upgrade")
        assert _planner_check(env) == {"check": "planner statistics", "ok": True, "detail": ANY}
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ALTER TABLE runs SET (autovacuum_enabled = false)")
            conn.execute(
                "INSERT INTO runs (id, workflow, input, status, created_at, updated_at, fence)"
                " SELECT gen_random_uuid(), 'w', '{}', 'completed', now(), now(), 0"
                " FROM generate_series(1, 1500)"
            )
            conn.execute("SELECT pg_stat_force_next_flush()")
            wait_until(lambda: _live(conn, "runs") >= 1500, timeout=30, what="the rows counted")
            stale = _planner_check(env)
            assert not stale["ok"]
            assert "runs (never analyzed, 1,500 rows)" in stale["detail"]
            assert "run ANALYZE" in stale["detail"]
            conn.execute("ANALYZE runs")
            wait_until(lambda: _analyzed(conn, "runs"), timeout=30, what="the analyze counted")
        assert _planner_check(env)["ok"]


def _planner_check(env: dict[str, str]) -> dict[str, Any]:
    done = run_cli(env, "doctor", "--json")
    [check] = [c for c in json.loads(done.stdout) if c["check"] == "planner statistics"]
    return dict(check)


def _live(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(
        "SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = %s", (table,)
    ).fetchone()
    return int(row[0]) if row else 0


def _analyzed(conn: psycopg.Connection[Any], table: str) -> bool:
    row = conn.execute(
        "SELECT last_analyze IS NOT NULL AND n_mod_since_analyze = 0 FROM pg_stat_user_tables"
        " WHERE relname = %s",
        (table,),
    ).fetchone()
    return bool(row and row[0])
