"""Slash commands are read by their fields, whatever words their values contain."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlencode

import pytest
from slack_bolt.adapter.socket_mode.internals import run_bolt_app
from slack_sdk.socket_mode.request import SocketModeRequest

from bot.slack.commands import HELP
from tests.integration.slack_harness import (
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_steps import (
    acked,
)

WORD = "payload"


def command_with(bot: BotInstance, command: str, **fields: str) -> dict[str, str]:
    """The fields of ``/agent command`` as Slack sends them, some replaced by ``fields``."""
    return {**dict(parse_qsl(bot.command_body(command).decode())), **fields}


def test_a_task_that_mentions_the_word_payload_starts_a_run(
    world: SlackWorld, bot: BotInstance
) -> None:
    """``/agent refund … webhook payload was wrong`` starts a run instead of a 404."""
    task = "refund order 1043 because the webhook payload was wrong"
    ack = acked(bot.post(urlencode(command_with(bot, task)).encode()))
    assert ack.text.startswith("Started run `")
    [run] = bot.services.runtime.runs()
    assert run.input["task"] == task


@pytest.mark.parametrize("field", ["text", "channel_name", "user_name", "team_domain"])
def test_the_word_payload_in_any_field_is_still_a_command(
    world: SlackWorld, bot: BotInstance, field: str
) -> None:
    """The word in the text, channel, user or team name does not make a command a click."""
    fields = command_with(
        bot, "list", **{field: f"list {WORD}s" if field == "text" else f"{WORD}-team"}
    )
    ack = acked(bot.post(urlencode(fields).encode()))
    assert ack.text == "No runs in this channel yet."


def test_socket_mode_commands_with_the_word_payload_are_commands(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Over Socket Mode a command arrives as an object, so the word changes nothing there."""
    fields = command_with(
        bot,
        f"help {WORD}",
        channel_name=f"{WORD}-team",
        user_name=f"{WORD}-fan",
        team_domain=f"{WORD}-inc",
    )
    request = SocketModeRequest(type="slash_commands", envelope_id="e-1", payload=fields)
    response = run_bolt_app(bot.app, request)
    assert response.status == 200
    assert json.loads(response.body)["text"] == HELP


@pytest.mark.parametrize(("attempt", "answered"), [(0, True), (1, False)])
def test_a_socket_mode_first_delivery_is_not_taken_for_a_retry(
    world: SlackWorld, bot: BotInstance, attempt: int, answered: bool
) -> None:
    """An envelope's ``retry_attempt: 0`` is a first delivery and is answered; 1 is a retry."""
    fields = command_with(bot, "help")
    request = SocketModeRequest(
        type="slash_commands",
        envelope_id="e-2",
        payload=fields,
        retry_attempt=attempt,
        retry_reason="" if attempt == 0 else "timeout",
    )
    response = run_bolt_app(bot.app, request)
    assert response.status == 200
    assert (json.loads(response.body)["text"] == HELP) if answered else response.body == ""
