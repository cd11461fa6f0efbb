"""``signoff doctor`` against the local Slack Web API and real database files, as a subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.slack.scopes import BOT_SCOPES
from devkit.sandbox.slack_api import DEFAULT_TOKEN, RunningSlackApi, Workspace, start_slack_api
from tests.integration import cli_ok, run_cli, signoff_env


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
