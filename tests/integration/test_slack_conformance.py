"""The answers Slack's own mock Web API servers give, and what Signoff does with each.

The mock servers in Slack's SDK test suites answer, besides success: HTTP 429 with
``Retry-After``; ``{"ok": false}`` with no ``error`` field and any status; Slack's
``fatal_error``; HTML error pages (a 503 "Server Error | Slack" page, a 404 page) instead of
JSON; a connection closed with no answer; and a bare ``{"ok": true}``. Real Slack adds a
``warning`` field and ``response_metadata.warnings`` to answers that succeed. The sandbox
Slack gives each of them on demand; here each meets the outbox dispatcher, the modal opener
and the Socket Mode connection.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from bot.slack.blocks import REJECT
from bot.slack.dispatcher import Dispatcher, DispatchOptions
from bot.slack.notifier import ROOT
from devkit.sandbox.slack_api import Workspace
from tests.integration.slack_harness import (
    APPROVER,
    TASK,
    UNPACED_PACE,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import outbox_rows, run_id_of
from tests.integration.slack_steps import (
    ShiftedClock,
    acked,
    start_refund_run,
)

Fault = Callable[[Workspace], None]

TRANSIENT: dict[str, Fault] = {
    "429 with Retry-After": lambda ws: ws.rate_limit("chat.postMessage", retry_after=1),
    "ok false, no error, 500": lambda ws: ws.answer_without_error("chat.postMessage"),
    "ok false, no error, 400": lambda ws: ws.answer_without_error("chat.postMessage", status=400),
    "fatal_error": lambda ws: ws.fail("chat.postMessage", "fatal_error"),
    "HTML 503 page": lambda ws: ws.answer_html("chat.postMessage", status=503),
    "HTML 404 page": lambda ws: ws.answer_html("chat.postMessage", status=404),
    "two dropped connections": lambda ws: ws.disconnect("chat.postMessage", times=2),
}


def dispatcher_at(bot: BotInstance, clock: ShiftedClock) -> Dispatcher:
    """A dispatcher of ``bot``'s process that reads the time from ``clock``."""
    return Dispatcher(
        bot.services.outbox,
        bot.client,
        bot.services.approvals,
        clock,
        "dispatcher-1",
        DispatchOptions(pace=UNPACED_PACE),
    )


def root_row(bot: BotInstance) -> dict[str, object]:
    """The outbox row of the run's root message."""
    [root] = [r for r in outbox_rows(bot) if r["kind"] == ROOT]
    return root


@pytest.mark.parametrize("answer", list(TRANSIENT), ids=list(TRANSIENT))
def test_a_transient_answer_leaves_the_root_pending_and_it_is_posted_once_later(
    world: SlackWorld, bot: BotInstance, answer: str
) -> None:
    """Each "not now" answer of Slack's mocks keeps the notice, which is then posted once."""
    run_id = run_id_of(acked(bot.command(TASK)))
    TRANSIENT[answer](world.workspace)
    clock = ShiftedClock()
    dispatcher = dispatcher_at(bot, clock)
    dispatcher.drain()
    root = root_row(bot)
    assert (root["status"], root["channel"], root["ts"]) == ("pending", None, None)
    assert root["last_error"]
    for _ in range(3):  # each later round is past the backoff of the one before
        clock.offset += timedelta(minutes=10)
        dispatcher.drain()
    root = root_row(bot)
    assert (root["status"], root["ts"]) == ("sent", world.root_of(run_id).ts)
    assert len(world.roots()) == 1


def test_a_dropped_connection_is_looked_up_in_history_before_posting_again(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A post whose connection closed unanswered may have landed: the retry looks in the
    channel's history first, then posts once."""
    run_id = run_id_of(acked(bot.command(TASK)))
    world.workspace.disconnect("chat.postMessage")
    clock = ShiftedClock()
    dispatcher = dispatcher_at(bot, clock)
    dispatcher.drain()
    clock.offset = timedelta(minutes=10)
    dispatcher.drain()
    root = root_row(bot)
    assert (root["status"], root["ts"]) == ("sent", world.root_of(run_id).ts)
    assert len(world.roots()) == 1
    methods = [c.method for c in world.workspace.calls() if c.method != "auth.test"]
    assert methods[:3] == ["chat.postMessage", "conversations.history", "chat.postMessage"]


def test_an_answer_with_warnings_is_a_delivery(world: SlackWorld, bot: BotInstance) -> None:
    """``ok`` with ``warning`` and ``response_metadata.warnings`` is delivered, not retried."""
    run_id = run_id_of(acked(bot.command(TASK)))
    world.workspace.warn("chat.postMessage", "missing_charset")
    dispatcher_at(bot, ShiftedClock()).drain()
    root = root_row(bot)
    assert (root["status"], root["ts"], root["last_error"]) == (
        "sent",
        world.root_of(run_id).ts,
        None,
    )
    [warned] = [c for c in world.workspace.calls("chat.postMessage") if c.ok][:1]
    assert warned.ok


@pytest.mark.parametrize(
    "fault",
    [
        lambda ws: ws.answer_html("views.open", status=503),
        lambda ws: ws.answer_without_error("views.open"),
        lambda ws: ws.disconnect("views.open", times=2),
    ],
    ids=["HTML 503 page", "ok false, no error", "dropped connections"],
)
def test_a_modal_slack_fails_to_open_is_explained_to_the_clicker(
    world: SlackWorld, bot: BotInstance, fault: Fault
) -> None:
    """Reject's modal failing to open with a mock's odd answer tells the clicker so."""
    run_id = start_refund_run(world, bot)
    card = world.card(
        next(a.id for a in bot.services.approvals.store.list_approvals(run_id=run_id))
    )
    fault(world.workspace)
    seen = len(world.ephemerals(APPROVER))
    acked(bot.click(APPROVER, REJECT, card))
    [told] = world.new_ephemerals(APPROVER, seen, drain=bot)
    assert told.startswith("Sorry: Slack did not open the dialog")
