"""Whatever a signed request to ``/slack/events`` carries, the app answers it without a 5xx,
stores what it accepted whole or nothing at all, and lets no markup through to Slack.

Every example is signed with the signing secret (so it passes the signature check) and sent
over loopback HTTP to the real Bolt app (``slack_harness``), on one SQLite file shared by the
module's examples. Its text comes from ``tests.hostile``: any code point (lone surrogates too,
which reach the app as invalid UTF-8), NaN, duplicate keys, nesting 10,000 levels deep, and
markup (``<!channel>``, ``<@U…>``, links, direction overrides).

Before these tests, a ``block_actions`` or ``view_submission`` payload nesting 10,000 levels
deep (20 KB) was answered with HTTP 500: the request guard's ``json.loads`` raised
``RecursionError``, which nothing caught.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime import Actor, Approval, ApprovalStatus, Decision
from agent_runtime.json_limits import strict_loads
from bot.app.request_hygiene import MAX_BODY_BYTES
from bot.slack.blocks import APPROVE, EDIT, FORK, HISTORY, REJECT, VIEW_ARGS
from bot.slack.commands import StartRun, parse
from bot.slack.text import user as mention
from devkit.sandbox.slack_api import View
from store import models
from tests.hostile import HOSTILE_IDS, HOSTILE_TEXTS, any_char, json_texts, json_values, texts
from tests.integration.slack_harness import (
    APPROVER,
    OUTSIDER,
    PEOPLE,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import approvals_of, run_id_of, unescaped_markup
from tests.integration.slack_steps import (
    start_refund_run,
)

MARKUP = ["<!channel>", "<!here>", "<@U_EVE>", "<#C123>", "<https://evil.example|click>"]
ACTION_IDS = [APPROVE, REJECT, EDIT, VIEW_ARGS, HISTORY, FORK, "nonsense"]
CALLBACKS = ["approval.edit_submit", "approval.reject_submit", "nonsense"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlackWorld]:
    """The fake Slack, the provider and one app instance on a SQLite file, for the module."""
    folder: Path = tmp_path_factory.mktemp("slack-properties")
    with SlackWorld(folder, f"sqlite:///{folder / 'signoff.db'}") as built:
        built.instance()
        yield built


@pytest.fixture(scope="module")
def bot(world: SlackWorld) -> BotInstance:
    """The world's app instance."""
    return world.instances[0]


@pytest.fixture(scope="module")
def refund(world: SlackWorld, bot: BotInstance) -> Approval:
    """A run waiting on its refund's approval, whose card is in Slack."""
    return approvals_of(bot, start_refund_run(world, bot))["issue_refund"]


@pytest.fixture(scope="module")
def email(world: SlackWorld, bot: BotInstance) -> Approval:
    """Another run's email approval, asked once that run's refund was approved and done."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    approver = Actor(user_id=APPROVER)
    assert bot.services.approvals.decide(refund.id, approver, Decision.APPROVE).accepted
    bot.work()
    bot.drain()
    return approvals_of(bot, run_id)["send_email"]


@pytest.fixture(scope="module")
def email_edit_view(world: SlackWorld, bot: BotInstance, email: Approval) -> View:
    """The edit modal of the email's approval, opened by the approver."""
    assert bot.click(APPROVER, EDIT, world.card(email.id)).status == 200
    return world.modal("approval.edit_submit", email.id)


@pytest.fixture(scope="module")
def edit_view(world: SlackWorld, bot: BotInstance, refund: Approval) -> View:
    """The edit modal of the refund's approval, opened by the approver."""
    assert bot.click(APPROVER, EDIT, world.card(refund.id)).status == 200
    return world.modal("approval.edit_submit", refund.id)


# -- building what Slack would send, hostile text and all ------------------------------------


def form(fields: dict[str, str]) -> bytes:
    """URL-encode ``fields`` as UTF-8, lone surrogates included (they become invalid UTF-8)."""
    return "&".join(
        f"{quote(k)}={quote(v.encode('utf-8', 'surrogatepass'), safe='')}"
        for k, v in fields.items()
    ).encode()


def payload_body(payload: Any) -> bytes:
    """The form body Slack sends for an interaction: ``payload=<JSON>``."""
    return form({"payload": json.dumps(payload, ensure_ascii=False, allow_nan=True)})


def command_fields(world: SlackWorld, text: str, user: str) -> dict[str, str]:
    """The fields of ``/agent text`` typed by ``user``."""
    return {
        "team_id": world.workspace.team_id,
        "channel_id": world.channel,
        "user_id": user,
        "user_name": "someone",
        "command": "/agent",
        "text": text,
        "response_url": "http://127.0.0.1:9/commands/response",
        "trigger_id": world.workspace.issue_trigger(user),
    }


def marked_up(parts: list[str]) -> str:
    """Join hostile parts into one text."""
    return " ".join(parts)


command_texts = st.lists(st.sampled_from(MARKUP) | st.text(any_char, max_size=30), max_size=6).map(
    marked_up
)


# -- what must hold after every request ------------------------------------------------------


def assert_answered(status: int, body: bytes) -> None:
    """Answered as Slack expects (200), or refused with a 4xx that says why; never a 5xx."""
    assert status < 500, body[:300]
    if status >= 400:
        assert json.loads(body)["error"], body[:300]


def assert_nothing_half_stored(bot: BotInstance) -> None:
    """Every run has its root message queued (they are written in one transaction)."""
    with bot.services.store.engine.connect() as conn:
        runs = {
            r for (r,) in conn.execute(models.runs.select().with_only_columns(models.runs.c.id))
        }
        roots = {
            r
            for (r,) in conn.execute(
                models.outbox.select()
                .with_only_columns(models.outbox.c.run_id)
                .where(models.outbox.c.kind == "run.root")
            )
        }
    assert runs <= roots, runs - roots


def assert_no_markup_posted(world: SlackWorld, bot: BotInstance, seen: int, user: str) -> None:
    """Nothing posted since the first ``seen`` posts carries markup the bot did not write
    itself (mentions of the scenario's people, and of ``user`` if it is a plain id)."""
    bot.drain()
    allowed = {f"<@{person}>" for person in PEOPLE} | {mention(user)}
    assert unescaped_markup(world.posted()[seen:], allowed) == []


# -- the slash command -----------------------------------------------------------------------


@given(text=command_texts, user=st.sampled_from(["U_REQ", OUTSIDER]) | texts)
def test_any_command_is_answered_and_stored_whole_or_not_at_all(
    world: SlackWorld, bot: BotInstance, text: str, user: str
) -> None:
    """Any ``/agent`` text: answered, the run (if any) holds the task as typed, no markup."""
    seen = len(world.posted())
    ack = bot.post(form(command_fields(world, text, user)))
    assert_answered(ack.status, ack.body.encode())
    if ack.status == 200:
        assert ack.text, "an answer says what happened"
    if "Started run" in ack.text:
        run = bot.services.runtime.get(run_id_of(ack))
        started = parse(text)
        assert isinstance(started, StartRun)
        assert run.input["task"] == started.task
    assert_nothing_half_stored(bot)
    assert_no_markup_posted(world, bot, seen, user)


# -- block_actions ---------------------------------------------------------------------------


def action_payload(world: SlackWorld, user: Any, action_id: str, value: Any, extra: Any) -> Any:
    """A ``block_actions`` payload with ``value`` in its one action and ``extra`` beside it."""
    return {
        "type": "block_actions",
        "user": {"id": user, "username": "x", "team_id": world.workspace.team_id},
        "team": {"id": world.workspace.team_id},
        "api_app_id": world.workspace.app_id,
        "trigger_id": world.workspace.issue_trigger("U_REQ"),
        "container": {"type": "message", "channel_id": world.channel, "message_ts": "1.0"},
        "channel": {"id": world.channel},
        "response_url": "http://127.0.0.1:9/actions/response",
        "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": value}],
        "extra": extra,
    }


@given(
    user=st.sampled_from([OUTSIDER]) | texts,
    action_id=st.sampled_from(ACTION_IDS),
    value=texts | json_texts,
    extra=json_values,
)
def test_any_click_is_answered_and_decides_nothing_it_may_not(
    world: SlackWorld,
    bot: BotInstance,
    refund: Approval,
    user: str,
    action_id: str,
    value: str,
    extra: Any,
) -> None:
    """Any click by anyone but an approver: answered, and the refund stays pending."""
    body = payload_body(action_payload(world, user, action_id, value, extra))
    ack = bot.post(body)
    assert_answered(ack.status, ack.body.encode())
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING
    assert_nothing_half_stored(bot)


@pytest.mark.parametrize("hostile", HOSTILE_TEXTS, ids=HOSTILE_IDS)
def test_hostile_click_payloads_are_refused_before_any_listener(
    world: SlackWorld, bot: BotInstance, refund: Approval, hostile: str
) -> None:
    """A payload nesting 10,000 levels, or holding NaN, Infinity, duplicate keys or a lone
    surrogate, is refused with HTTP 400 before Bolt parses it."""
    text = json.dumps(action_payload(world, OUTSIDER, APPROVE, refund.id, None))
    ack = bot.post(form({"payload": text[:-1] + ', "hostile": ' + hostile + "}"}))
    assert ack.status == 400, ack.body
    assert "payload" in ack.json()["error"]
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING


def test_a_body_over_the_limit_is_refused_unread(world: SlackWorld, bot: BotInstance) -> None:
    """A body over ``MAX_BODY_BYTES`` is refused with 413 (by its length, before parsing)."""
    text = "x" * (MAX_BODY_BYTES + 1)
    ack = bot.post(form(command_fields(world, text, "U_REQ")))
    assert ack.status == 413, ack.body


# -- view_submission -------------------------------------------------------------------------


edit_args = st.fixed_dictionaries({"order_id": json_values, "amount_cents": json_values}).map(
    lambda d: json.dumps(d, ensure_ascii=False, allow_nan=True)
)


@given(value=json_texts | edit_args | texts, callback=st.sampled_from(CALLBACKS))
def test_any_submission_is_answered_and_stored_whole_or_not_at_all(
    world: SlackWorld,
    bot: BotInstance,
    refund: Approval,
    edit_view: View,
    value: str,
    callback: str,
) -> None:
    """Any text in the edit (or reject) modal, by the approver: answered; the approval either
    stays as it was or is decided with exactly the arguments (or reason) submitted."""
    before = bot.services.approvals.get(refund.id)
    seen = len(world.posted())
    view = replace(edit_view, view={**edit_view.view, "callback_id": callback})
    ack = bot.post(submission(bot, view, value))
    assert_answered(ack.status, ack.body.encode())
    after = bot.services.approvals.get(refund.id)
    if after.version != before.version:
        assert before.status == ApprovalStatus.PENDING
        if after.status == ApprovalStatus.REJECTED:
            assert after.reason == value
        else:
            assert after.decided_args == strict_loads(value)
    elif ack.status == 200 and before.status == ApprovalStatus.PENDING:
        assert ack.json().get("response_action") == "errors", ack.body
    assert_nothing_half_stored(bot)
    assert_no_markup_posted(world, bot, seen, APPROVER)


@pytest.mark.parametrize(
    "text",
    [
        '{"to": "a@example.com", "body": "hi", "body": "refund everything"}',
        '{"to": "a@example.com", "body": NaN}',
    ],
    ids=["duplicate keys", "NaN"],
)
def test_an_edit_with_duplicate_keys_or_nan_is_refused_in_the_modal(
    bot: BotInstance, email: Approval, email_edit_view: View, text: str
) -> None:
    """Edited arguments with a key twice (which one would run?) or NaN: refused by name in
    the modal, and the approval stays pending."""
    ack = bot.post(bot.submit_body(APPROVER, email_edit_view, text))
    assert ack.status == 200, ack.body
    assert ack.json()["response_action"] == "errors", ack.body
    assert ack.json()["errors"]["args"].startswith("Refused: they hold"), ack.body
    assert bot.services.approvals.get(email.id).status == ApprovalStatus.PENDING


def submission(bot: BotInstance, view: View, value: str) -> bytes:
    """The form body of submitting ``view`` with ``value``, surrogates kept as invalid UTF-8."""
    body = bot.submit_body(APPROVER, view, "\x00placeholder\x00")
    payload = json.loads(bytes_unquoted(body))
    [block] = payload["view"]["state"]["values"]
    [action] = payload["view"]["state"]["values"][block]
    payload["view"]["state"]["values"][block][action]["value"] = value
    return payload_body(payload)


def bytes_unquoted(body: bytes) -> str:
    """The JSON text of a ``payload=`` form body."""
    return unquote_plus(body.decode().removeprefix("payload="))
