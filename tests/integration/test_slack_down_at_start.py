"""Starting: requests are answered while Slack's Web API is unreachable from the first
request on, and an instance starts without alarming warnings."""

from __future__ import annotations

import logging

import pytest

from agent_runtime import RunStatus
from tests.integration.slack_harness import (
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import run_id_of
from tests.integration.slack_steps import (
    acked,
)


def test_commands_are_answered_when_slack_is_down_before_the_first_request(
    world: SlackWorld, bot: BotInstance
) -> None:
    """With the fake Slack offline before any request, ``/agent`` commands are still
    acknowledged and start runs (no ``auth.test`` stands between Slack and the listener)."""
    world.slack.go_offline()

    first = run_id_of(acked(bot.command("refund order 1042")))
    second = run_id_of(acked(bot.command("refund order 1043")))

    assert {bot.services.runtime.get(r).status for r in (first, second)} == {RunStatus.PENDING}
    world.slack.go_online()
    acked(bot.command("refund order 1044"))
    assert world.workspace.calls("auth.test") == [], "requests never wait on auth.test"


def test_an_instance_started_with_its_token_in_the_environment_logs_no_bolt_warning(
    world: SlackWorld, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``SLACK_BOT_TOKEN`` in the environment, as in production, starting an instance
    logs nothing from Bolt about a token it does not use; Bolt's other warnings still pass."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-from-the-environment")
    with caplog.at_level(logging.WARNING, logger="slack_bolt"):
        world.instance(migrate=False)
        logging.getLogger("slack_bolt.App").warning("another warning")
    assert [r.getMessage() for r in caplog.records if r.name.startswith("slack_bolt")] == [
        "another warning"
    ]
