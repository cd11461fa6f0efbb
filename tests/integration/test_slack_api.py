"""The local Slack Web API, driven by the real ``slack_sdk.WebClient`` over loopback HTTP.

Every test starts a server on a free port and talks to it with ``WebClient(base_url=<url>/api/)``,
so the wire formats slack_sdk really uses (JSON bodies for chat.* and views.*, form bodies for
auth.test and conversations.open, query strings for users.info and chat.getPermalink) are the
ones exercised.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from slack_bolt import App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from devkit.sandbox.slack_api import (
    RunningSlackApi,
    User,
    Workspace,
    WorkspaceEvent,
    start_slack_api,
)

TS_RE = re.compile(r"^\d{10}\.\d{6}$")
EPOCH = 1_732_900_000.0


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = EPOCH) -> None:
        self.now = now

    def __call__(self) -> float:
        """Return the current fake time."""
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock starting at ``EPOCH``."""
    return FakeClock()


@pytest.fixture
def slack(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningSlackApi]:
    """A local Slack Web API on a free loopback port, on a workspace with the fake clock."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with start_slack_api(Workspace(clock=clock)) as running:
        yield running


@pytest.fixture
def client(slack: RunningSlackApi) -> WebClient:
    """A real ``WebClient`` pointed at the local API with the right token."""
    return WebClient(token="xoxb-test", base_url=slack.url + "/api/")


@pytest.fixture
def dana(slack: RunningSlackApi) -> User:
    """A person in the workspace."""
    return slack.workspace.add_user("dana", real_name="Dana Scully")


def general(slack: RunningSlackApi) -> str:
    """Return the id of ``#general``."""
    return slack.workspace.resolve_channel("general").id


def modal(title: str = "Approve", **extra: Any) -> dict[str, Any]:
    """Return a minimal valid modal view."""
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": title},
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "Refund?"}}],
        **extra,
    }


def section(text: str) -> dict[str, Any]:
    """Return a section block with mrkdwn text."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def api_error(exc: pytest.ExceptionInfo[SlackApiError]) -> str:
    """Return the Slack error code a SlackApiError carries."""
    return str(exc.value.response["error"])


def test_auth_test_reports_the_bot_and_team(slack: RunningSlackApi, client: WebClient) -> None:
    """auth.test answers with the team and the bot's user and bot ids, as Bolt expects."""
    answer = client.auth_test()
    assert answer["team_id"] == slack.workspace.team_id
    assert answer["user_id"] == slack.workspace.bot_user.id
    assert answer["bot_id"] == slack.workspace.bot_id
    assert slack.workspace.calls("auth.test")[0].ok


def test_bolt_app_verifies_its_token_against_the_local_api(client: WebClient) -> None:
    """A Bolt App built on the client passes its auth.test token verification."""
    app = App(client=client, signing_secret="secret")
    assert app.client is client


def test_post_message_stores_text_and_blocks(slack: RunningSlackApi, client: WebClient) -> None:
    """chat.postMessage returns channel, ts and message, and the workspace holds the message."""
    answer = client.chat_postMessage(
        channel="#general", text="Refund 49.99?", blocks=[section("*Refund* 49.99?")]
    )
    channel = general(slack)
    assert answer["channel"] == channel
    assert TS_RE.match(answer["ts"])
    assert answer["message"]["bot_id"] == slack.workspace.bot_id
    stored = slack.workspace.find_message(channel, answer["ts"])
    assert stored is not None
    assert stored.text == "Refund 49.99?"
    assert stored.blocks == [section("*Refund* 49.99?")]
    assert stored.user == slack.workspace.bot_user.id
    assert slack.workspace.messages(channel) == [stored]


def test_ts_values_are_unique_and_increasing(slack: RunningSlackApi, client: WebClient) -> None:
    """Messages posted within one clock tick still get distinct, increasing ts strings."""
    stamps = [client.chat_postMessage(channel="general", text=f"m{i}")["ts"] for i in range(3)]
    assert stamps == ["1732900000.000000", "1732900000.000001", "1732900000.000002"]


def test_unknown_channel_is_channel_not_found(client: WebClient) -> None:
    """Posting to a channel that does not exist fails with channel_not_found."""
    with pytest.raises(SlackApiError) as exc:
        client.chat_postMessage(channel="C0NOPE", text="hi")
    assert api_error(exc) == "channel_not_found"


def test_thread_replies_stay_in_their_thread(slack: RunningSlackApi, client: WebClient) -> None:
    """Replies live in the thread; a broadcast reply also shows in the channel timeline."""
    channel = general(slack)
    parent = client.chat_postMessage(channel=channel, text="Approval needed")["ts"]
    first = client.chat_postMessage(channel=channel, text="step 1", thread_ts=parent)
    nested = client.chat_postMessage(channel=channel, text="step 2", thread_ts=first["ts"])
    broadcast = client.chat_postMessage(
        channel=channel, text="done", thread_ts=parent, reply_broadcast=True
    )
    assert first["message"]["thread_ts"] == parent
    assert nested["message"]["thread_ts"] == parent
    ws = slack.workspace
    assert [m.text for m in ws.thread(channel, parent)] == [
        "Approval needed",
        "step 1",
        "step 2",
        "done",
    ]
    assert [m.text for m in ws.messages(channel, thread_ts=parent)] == ["step 1", "step 2", "done"]
    assert [m.ts for m in ws.messages(channel)] == [parent, broadcast["ts"]]


def test_reply_to_a_missing_thread_is_refused(slack: RunningSlackApi, client: WebClient) -> None:
    """A reply to an unknown parent is thread_not_found; a malformed ts is invalid_thread_ts."""
    with pytest.raises(SlackApiError) as missing:
        client.chat_postMessage(channel="general", text="x", thread_ts="1732800000.000001")
    with pytest.raises(SlackApiError) as malformed:
        client.chat_postMessage(channel="general", text="x", thread_ts="yesterday")
    assert api_error(missing) == "thread_not_found"
    assert api_error(malformed) == "invalid_thread_ts"
    assert slack.workspace.messages(general(slack)) == []


def test_update_replaces_content_and_keeps_history(
    slack: RunningSlackApi, client: WebClient, clock: FakeClock
) -> None:
    """chat.update edits in place; the earlier version is kept in the edit history."""
    posted = client.chat_postMessage(channel="general", text="Waiting", blocks=[section("Waiting")])
    clock.now += 5
    answer = client.chat_update(
        channel=posted["channel"],
        ts=posted["ts"],
        text="Approved",
        blocks=[section(":white_check_mark: Approved")],
    )
    assert answer["ts"] == posted["ts"]
    assert answer["message"]["edited"]["ts"].startswith("1732900005.")
    stored = slack.workspace.find_message(posted["channel"], posted["ts"])
    assert stored is not None
    assert (stored.text, stored.blocks) == ("Approved", [section(":white_check_mark: Approved")])
    assert [(e.text, e.blocks) for e in stored.edits] == [("Waiting", [section("Waiting")])]
    assert slack.workspace.messages(posted["channel"]) == [stored]


def test_update_of_unknown_or_foreign_message_is_refused(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """An unknown ts is message_not_found; a person's message is cant_update_message."""
    channel = general(slack)
    theirs = slack.workspace.post_message(channel, text="hello bot", user=dana.id)
    with pytest.raises(SlackApiError) as unknown:
        client.chat_update(channel=channel, ts="1732800000.000001", text="x")
    with pytest.raises(SlackApiError) as foreign:
        client.chat_update(channel=channel, ts=theirs.ts, text="x")
    assert api_error(unknown) == "message_not_found"
    assert api_error(foreign) == "cant_update_message"


def test_ephemeral_message_is_shown_to_one_user(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """chat.postEphemeral returns message_ts and records the message for that user only."""
    channel = general(slack)
    answer = client.chat_postEphemeral(
        channel=channel, user=dana.id, text="Only you", blocks=[section("Only you")]
    )
    assert TS_RE.match(answer["message_ts"])
    [shown] = slack.workspace.ephemerals(channel, user=dana.id)
    assert (shown.text, shown.message_ts) == ("Only you", answer["message_ts"])
    assert slack.workspace.messages(channel) == []


def test_ephemeral_to_someone_outside_the_channel_is_refused(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """An ephemeral message in another person's DM is user_not_in_channel."""
    fox = slack.workspace.add_user("fox")
    fox_dm = slack.workspace.open_im(fox.id)
    with pytest.raises(SlackApiError) as exc:
        client.chat_postEphemeral(channel=fox_dm.id, user=dana.id, text="hi")
    assert api_error(exc) == "user_not_in_channel"


def test_dm_via_conversations_open(slack: RunningSlackApi, client: WebClient, dana: User) -> None:
    """conversations.open gives a stable IM id per user; messages posted there land in it."""
    first = client.conversations_open(users=dana.id)
    again = client.conversations_open(users=[dana.id])
    im = first["channel"]["id"]
    assert im.startswith("D")
    assert again["channel"]["id"] == im
    assert again["already_open"] is True
    client.chat_postMessage(channel=im, text="Your approval is needed")
    assert [m.text for m in slack.workspace.messages(im)] == ["Your approval is needed"]
    assert slack.workspace.channel(im) == slack.workspace.open_im(dana.id)


def test_conversations_open_with_unknown_user(client: WebClient) -> None:
    """Opening a DM with a user who does not exist is user_not_found."""
    with pytest.raises(SlackApiError) as exc:
        client.conversations_open(users="U0NOBODY")
    assert api_error(exc) == "user_not_found"


def test_users_info_and_permalink(slack: RunningSlackApi, client: WebClient, dana: User) -> None:
    """users.info describes a person; chat.getPermalink links to a reply within its thread."""
    user = client.users_info(user=dana.id)["user"]
    assert (user["name"], user["real_name"], user["is_bot"]) == ("dana", "Dana Scully", False)
    channel = general(slack)
    parent = client.chat_postMessage(channel=channel, text="p")["ts"]
    reply = client.chat_postMessage(channel=channel, text="r", thread_ts=parent)["ts"]
    link = client.chat_getPermalink(channel=channel, message_ts=reply)["permalink"]
    assert link == (
        f"https://signoff-sandbox.slack.com/archives/{channel}/"
        f"p{reply.replace('.', '')}?thread_ts={parent}&cid={channel}"
    )
    with pytest.raises(SlackApiError) as exc:
        client.users_info(user="U0NOBODY")
    assert api_error(exc) == "user_not_found"


def test_views_open_with_a_fresh_trigger(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """views.open exchanges a trigger and answers with the view, its id and hash."""
    trigger = slack.workspace.issue_trigger(dana.id)
    view = client.views_open(
        trigger_id=trigger, view=modal(private_metadata="run-42", callback_id="approve")
    )["view"]
    assert view["id"].startswith("V")
    assert view["hash"]
    assert view["private_metadata"] == "run-42"
    [opened] = slack.workspace.views()
    assert (opened.id, opened.trigger_id, opened.user) == (view["id"], trigger, dana.id)
    assert opened.private_metadata == "run-42"


def test_views_open_refuses_reused_unknown_and_expired_triggers(
    slack: RunningSlackApi, client: WebClient, dana: User, clock: FakeClock
) -> None:
    """Reused, unknown and 3-s-old triggers are refused with Slack's own three errors."""
    used = slack.workspace.issue_trigger(dana.id)
    client.views_open(trigger_id=used, view=modal())
    stale = slack.workspace.issue_trigger(dana.id)
    clock.now += 3.5
    errors = []
    for trigger in (used, "1732900000.1.deadbeef", stale):
        with pytest.raises(SlackApiError) as exc:
            client.views_open(trigger_id=trigger, view=modal())
        errors.append(api_error(exc))
    assert errors == ["exchanged_trigger_id", "invalid_trigger_id", "expired_trigger_id"]
    assert len(slack.workspace.views()) == 1


def test_views_update_checks_the_hash(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """views.update with the current hash replaces the view; a stale hash is hash_conflict."""
    opened = client.views_open(
        trigger_id=slack.workspace.issue_trigger(dana.id), view=modal(external_id="run-42")
    )["view"]
    updated = client.views_update(
        view_id=opened["id"], hash=opened["hash"], view=modal("Approved")
    )["view"]
    assert updated["id"] == opened["id"]
    assert updated["hash"] != opened["hash"]
    with pytest.raises(SlackApiError) as conflict:
        client.views_update(view_id=opened["id"], hash=opened["hash"], view=modal("Again"))
    by_external = client.views_update(external_id="run-42", view=modal("By external id"))
    with pytest.raises(SlackApiError) as missing:
        client.views_update(view_id="V0NOPE", view=modal())
    assert api_error(conflict) == "hash_conflict"
    assert api_error(missing) == "not_found"
    stored = slack.workspace.view(opened["id"])
    assert stored is not None
    assert stored.view["title"]["text"] == "By external id"
    assert by_external["view"]["hash"] == stored.hash
    assert [u["title"]["text"] for u in stored.updates] == ["Approved", "By external id"]


def test_views_push_stacks_up_to_three(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """views.push stacks on the modal the trigger came from, three views at most."""
    ws = slack.workspace
    root = client.views_open(trigger_id=ws.issue_trigger(dana.id), view=modal("Root"))["view"]
    second = client.views_push(
        trigger_id=ws.issue_trigger(dana.id, view_id=root["id"]), view=modal("Second")
    )["view"]
    third = client.views_push(
        trigger_id=ws.issue_trigger(dana.id, view_id=second["id"]), view=modal("Third")
    )["view"]
    assert (second["root_view_id"], second["previous_view_id"]) == (root["id"], root["id"])
    assert third["previous_view_id"] == second["id"]
    with pytest.raises(SlackApiError) as exc:
        client.views_push(
            trigger_id=ws.issue_trigger(dana.id, view_id=third["id"]), view=modal("Fourth")
        )
    assert api_error(exc) == "push_limit_reached"
    ws.close_view(root["id"], clear=True)
    assert ws.views(open_only=True) == []


def test_wrong_or_missing_token_is_refused(slack: RunningSlackApi) -> None:
    """A wrong token is invalid_auth, no token not_authed, and nothing is posted."""
    wrong = WebClient(token="xoxb-wrong", base_url=slack.url + "/api/")
    anonymous = WebClient(base_url=slack.url + "/api/")
    with pytest.raises(SlackApiError) as bad:
        wrong.chat_postMessage(channel="general", text="hi")
    with pytest.raises(SlackApiError) as none:
        anonymous.auth_test()
    assert (bad.value.response.status_code, api_error(bad)) == (200, "invalid_auth")
    assert api_error(none) == "not_authed"
    assert slack.workspace.messages(general(slack)) == []
    assert [c.error for c in slack.workspace.calls()] == ["invalid_auth", "not_authed"]


def test_rate_limit_raises_429_without_a_retry_handler(
    slack: RunningSlackApi, client: WebClient
) -> None:
    """An injected rate limit reaches a plain WebClient as SlackApiError 429 + Retry-After."""
    slack.workspace.rate_limit("chat.postMessage", retry_after=7)
    with pytest.raises(SlackApiError) as exc:
        client.chat_postMessage(channel="general", text="hi")
    response = exc.value.response
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "7"
    assert response["error"] == "ratelimited"
    assert slack.workspace.messages(general(slack)) == []
    client.chat_postMessage(channel="general", text="hi")
    assert [c.status for c in slack.workspace.calls("chat.postMessage")] == [429, 200]


def test_rate_limit_is_retried_by_the_rate_limit_handler(
    slack: RunningSlackApi, client: WebClient
) -> None:
    """With RateLimitErrorRetryHandler the client waits Retry-After and the retry succeeds."""
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=1))
    slack.workspace.rate_limit("chat.postMessage", retry_after=0)
    answer = client.chat_postMessage(channel="general", text="eventually")
    assert answer.status_code == 200
    assert [c.status for c in slack.workspace.calls("chat.postMessage")] == [429, 200]
    assert [m.text for m in slack.workspace.messages(answer["channel"])] == ["eventually"]


def test_injected_error_answers_once(slack: RunningSlackApi, client: WebClient) -> None:
    """A scripted failure answers the next call with that error; the call after succeeds."""
    slack.workspace.fail("chat.update", "edit_window_closed")
    posted = client.chat_postMessage(channel="general", text="a")
    with pytest.raises(SlackApiError) as exc:
        client.chat_update(channel=posted["channel"], ts=posted["ts"], text="b")
    assert api_error(exc) == "edit_window_closed"
    assert client.chat_update(channel=posted["channel"], ts=posted["ts"], text="b")["ok"]


@pytest.mark.parametrize(
    ("kwargs", "error", "pointer"),
    [
        ({"text": "x", "blocks": [{"type": "divider"}] * 51}, "invalid_blocks", "/blocks"),
        ({"text": "x", "blocks": [section("y" * 3001)]}, "invalid_blocks", "/blocks/0/text/text"),
        (
            {
                "text": "x",
                "blocks": [
                    {
                        "type": "actions",
                        "elements": [
                            {
                                "type": "button",
                                "text": {"type": "plain_text", "text": "b" * 76},
                                "action_id": "approve",
                            }
                        ],
                    }
                ],
            },
            "invalid_blocks",
            "/blocks/0/elements/0/text/text",
        ),
        (
            {
                "text": "x",
                "blocks": [
                    {
                        "type": "actions",
                        "elements": [
                            {
                                "type": "button",
                                "text": {"type": "plain_text", "text": "ok"},
                                "action_id": "a",
                                "value": "v" * 2001,
                            }
                        ],
                    }
                ],
            },
            "invalid_blocks",
            "/blocks/0/elements/0/value",
        ),
        (
            {
                "text": "x",
                "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
            },
            "invalid_blocks",
            "/blocks/0/text/text",
        ),
        ({"text": "x", "blocks": [{"type": "carousel"}]}, "invalid_blocks", "/blocks/0/type"),
        ({"text": "x" * 40_001}, "msg_too_long", None),
        pytest.param(
            {"text": ""},
            "no_text",
            None,
            marks=pytest.mark.filterwarnings(
                "ignore:The top-level `text` argument is missing:UserWarning"
            ),
        ),
    ],
    ids=[
        "51-blocks",
        "section-3001",
        "button-text-76",
        "button-value-2001",
        "header-151",
        "unknown-block",
        "text-40001",
        "no-text",
    ],
)
def test_block_kit_limits_on_messages(
    slack: RunningSlackApi,
    client: WebClient,
    kwargs: dict[str, Any],
    error: str,
    pointer: str | None,
) -> None:
    """Messages over Slack's Block Kit and text limits get Slack's error and details."""
    with pytest.raises(SlackApiError) as exc:
        client.chat_postMessage(channel="general", **kwargs)
    assert api_error(exc) == error
    if pointer is not None:
        messages = exc.value.response["response_metadata"]["messages"]
        assert any(m.endswith(f"[json-pointer:{pointer}]") for m in messages), messages
    assert slack.workspace.messages(general(slack)) == []


def test_fifty_blocks_are_accepted(slack: RunningSlackApi, client: WebClient) -> None:
    """Exactly 50 blocks, the limit, is a valid message."""
    answer = client.chat_postMessage(channel="general", text="x", blocks=[{"type": "divider"}] * 50)
    assert answer["ok"]


@pytest.mark.parametrize(
    ("view", "error"),
    [
        (modal(blocks=[{"type": "divider"}] * 101), "invalid_arguments"),
        (modal(private_metadata="m" * 3001), "invalid_arguments"),
        (modal("t" * 25), "invalid_arguments"),
        (
            modal(
                blocks=[
                    {
                        "type": "input",
                        "label": {"type": "plain_text", "text": "Why?"},
                        "element": {"type": "plain_text_input", "action_id": "why"},
                    }
                ]
            ),
            "invalid_arguments",
        ),
        (modal(blocks=[section("x" * 2900)] * 90), "view_too_large"),
    ],
    ids=["101-blocks", "metadata-3001", "title-25", "input-without-submit", "too-large"],
)
def test_block_kit_limits_on_modals(
    slack: RunningSlackApi, client: WebClient, dana: User, view: dict[str, Any], error: str
) -> None:
    """Invalid modals are refused without using up the trigger."""
    trigger = slack.workspace.issue_trigger(dana.id)
    with pytest.raises(SlackApiError) as exc:
        client.views_open(trigger_id=trigger, view=view)
    assert api_error(exc) == error
    assert client.views_open(trigger_id=trigger, view=modal())["ok"]


def test_form_encoded_blocks_are_decoded(slack: RunningSlackApi, client: WebClient) -> None:
    """A form body with blocks as a JSON string (the older wire format) is accepted."""
    answer = client.api_call(
        "chat.postMessage",
        params={"channel": "general", "text": "form", "blocks": json.dumps([section("form")])},
    )
    stored = slack.workspace.find_message(answer["channel"], answer["ts"])
    assert stored is not None
    assert stored.blocks == [section("form")]
    with pytest.raises(SlackApiError) as exc:
        client.api_call(
            "chat.postMessage", params={"channel": "general", "text": "x", "blocks": "[not json"}
        )
    assert api_error(exc) == "invalid_blocks_format"


def test_unknown_method_is_refused(client: WebClient) -> None:
    """A method the API does not serve answers unknown_method."""
    with pytest.raises(SlackApiError) as exc:
        client.api_call("reactions.add", params={"name": "eyes"})
    assert api_error(exc) == "unknown_method"


def test_subscribers_and_waiters_see_changes(slack: RunningSlackApi, client: WebClient) -> None:
    """Subscribers get each change as an event; wait_for_events returns once one arrives."""
    ws = slack.workspace
    seen: list[WorkspaceEvent] = []
    unsubscribe = ws.subscribe(seen.append)
    since = len(ws.events())
    poster = threading.Timer(0.1, lambda: client.chat_postMessage(channel="general", text="hi"))
    started = time.monotonic()
    poster.start()
    try:
        events = ws.wait_for_events(since, timeout=5)
        assert ws.wait_for(lambda: bool(ws.calls("chat.postMessage")), timeout=5)
    finally:
        poster.join()
    assert time.monotonic() - started < 5
    assert events[0].kind == "message_posted"
    unsubscribe()
    client.chat_postMessage(channel="general", text="unseen")
    assert [e.kind for e in seen] == ["message_posted", "api_call"]


def test_concurrent_posts_get_distinct_ts(slack: RunningSlackApi) -> None:
    """Posts from many threads at once all land, each with its own ts."""

    def post(i: int) -> None:
        """Post one message from a thread with its own client."""
        slack.client().chat_postMessage(channel="general", text=f"m{i}")

    threads = [threading.Thread(target=post, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stamps = [m.ts for m in slack.workspace.messages(general(slack))]
    assert len(stamps) == len(set(stamps)) == 16
    assert stamps == sorted(stamps)


def test_the_bot_posts_only_where_it_was_invited(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """A channel the bot has not joined is not_in_channel until /invite; IMs always work."""
    ws = slack.workspace
    quiet = ws.add_channel("payload-team", with_bot=False).id
    with pytest.raises(SlackApiError) as exc:
        client.chat_postMessage(channel=quiet, text="hello")
    assert api_error(exc) == "not_in_channel"
    ws.post_message(quiet, text="people still talk here", user=dana.id)
    ws.invite_bot(quiet)
    client.chat_postMessage(channel=quiet, text="hello")
    im = client.conversations_open(users=dana.id)["channel"]["id"]
    client.chat_postMessage(channel=im, text="a DM needs no invitation")
    ws.archive(quiet)
    with pytest.raises(SlackApiError) as exc:
        client.chat_postMessage(channel=quiet, text="hello again")
    assert api_error(exc) == "is_archived"


def test_a_bare_ok_answer_does_nothing(slack: RunningSlackApi, client: WebClient) -> None:
    """``answer_bare`` answers ``{"ok": true}`` alone, as Slack's mock servers do."""
    slack.workspace.answer_bare("chat.postMessage")
    answer = client.chat_postMessage(channel=general(slack), text="lost")
    assert answer.data == {"ok": True}
    assert slack.workspace.messages(general(slack)) == []
