"""Runs whose channel Slack refuses, and a bot token Slack refuses: nobody is left waiting."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode

import pytest

from agent_runtime import ApprovalStatus, RunId, RunStatus
from bot.slack.channel_refusals import cancel_message
from bot.slack.dispatcher import Dispatcher, DispatchOptions
from bot.slack.notifier import ROOT, root_key
from tests.integration import cli_ok, signoff_env
from tests.integration.response_urls import ResponseUrls
from tests.integration.slack_harness import (
    TASK,
    UNPACED_PACE,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import outbox_rows, run_id_of
from tests.integration.slack_steps import (
    ShiftedClock,
    acked,
)

TOLD_WITHIN_S = 5.0


@pytest.fixture
def responses() -> Iterator[ResponseUrls]:
    """Where the commands' ``response_url``s lead."""
    with ResponseUrls() as receiver:
        yield receiver


def start_in(bot: BotInstance, channel: str, response_url: str) -> RunId:
    """Type the refund task in ``channel``, with Slack's ``response_url`` for the command."""
    fields = dict(parse_qsl(bot.command_body(TASK, channel=channel).decode()))
    fields["response_url"] = response_url
    return run_id_of(acked(bot.post(urlencode(fields).encode())))


def channel_refusing(world: SlackWorld, error: str) -> str:
    """A channel where Slack refuses the bot's posts with ``error``."""
    if error == "channel_not_found":
        return "C0DELETED"
    channel = world.workspace.add_channel("payload-team").id
    if error == "is_archived":
        world.workspace.invite_bot(channel)
        world.workspace.archive(channel)
    return channel


@pytest.mark.parametrize("error", ["not_in_channel", "channel_not_found", "is_archived"])
def test_a_run_whose_channel_refuses_the_bot_is_cancelled_and_its_requester_told(
    world: SlackWorld, bot: BotInstance, responses: ResponseUrls, error: str
) -> None:
    """The requester learns within seconds how to fix it; no approval is left waiting."""
    run_id = start_in(bot, channel_refusing(world, error), responses.url("requester"))
    bot.work()
    assert bot.services.runtime.get(run_id).status == RunStatus.WAITING
    bot.drain()
    told = eventually(
        lambda: responses.texts("requester") or None,
        what="the requester told",
        timeout=TOLD_WITHIN_S,
    )
    assert told == [cancel_message(run_id, error)]
    if error != "is_archived":
        assert "/invite @Signoff" in told[0]
    assert bot.services.runtime.get(run_id).status == RunStatus.CANCELLED
    approvals = bot.services.approvals.store.list_approvals(run_id=run_id)
    assert approvals, "the worker had reached the approvals"
    assert {a.status for a in approvals} == {ApprovalStatus.CANCELLED}
    bot.drain()
    assert responses.texts("requester") == told, "told once"


def test_a_run_in_a_channel_the_bot_was_invited_to_is_posted(
    world: SlackWorld, bot: BotInstance, responses: ResponseUrls
) -> None:
    """After ``/invite @Signoff`` the same channel gets the run's thread and nobody is told."""
    channel = world.workspace.add_channel("payload-team").id
    world.workspace.invite_bot(channel)
    run_id = start_in(bot, channel, responses.url("requester"))
    bot.work()
    bot.drain()
    [root] = [m for m in world.workspace.messages(channel) if m.thread_ts is None]
    assert any(b.get("block_id") == f"run:{run_id}" for b in root.blocks or [])
    assert responses.texts("requester") == []


@pytest.mark.parametrize("error", ["invalid_auth", "token_revoked", "account_inactive"])
def test_a_refused_token_alerts_the_operator_and_keeps_every_notice(
    world: SlackWorld, bot: BotInstance, caplog: pytest.LogCaptureFixture, error: str
) -> None:
    """A token Slack refuses is an error in the log, stops all calls, and loses no notice."""
    run_id = run_id_of(acked(bot.command(TASK)))
    bot.work()
    world.workspace.fail("chat.postMessage", error)
    clock = ShiftedClock()
    dispatcher = Dispatcher(
        bot.services.outbox,
        bot.client,
        bot.services.approvals,
        clock,
        "dispatcher-1",
        DispatchOptions(pace=UNPACED_PACE),
    )
    with caplog.at_level(logging.ERROR, logger="bot.slack.dispatcher"):
        dispatcher.drain()
    assert any("refused the bot token" in r.getMessage() for r in caplog.records)
    calls = len(world.workspace.calls())
    dispatcher.drain()
    assert len(world.workspace.calls()) == calls, "no call while the token is refused"
    assert {r["status"] for r in outbox_rows(bot)} == {"pending"}
    clock.offset = timedelta(minutes=1)
    dispatcher.drain()
    assert world.root_of(run_id)
    assert {r["status"] for r in outbox_rows(bot)} == {"sent"}


def test_notices_slack_refused_are_listed_by_the_cli(
    world: SlackWorld, bot: BotInstance, responses: ResponseUrls
) -> None:
    """``signoff outbox --failed [--json]`` shows each dead notice with Slack's reason."""
    run_id = start_in(bot, channel_refusing(world, "not_in_channel"), responses.url("req"))
    bot.drain()
    env = signoff_env(world.database_url)
    listed = json.loads(cli_ok(env, "outbox", "--failed", "--json"))
    dead = listed[-1]
    assert (dead["key"], dead["run_id"], dead["kind"], dead["error"]) == (
        root_key(run_id),
        run_id,
        ROOT,
        "slack: not_in_channel",
    ), "oldest last"
    assert {d["error"] for d in listed[:-1]} == {
        f"depends on {root_key(run_id)}, which could not be delivered"
    }
    assert f"run.root run {run_id} after 1 attempt(s): slack: not_in_channel" in cli_ok(
        env, "outbox", "--failed"
    )
