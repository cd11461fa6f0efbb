"""Messages through the local Slack Web API: posting, threads, updates, ephemerals, DMs,
people, permalinks, form-encoded bodies, change subscribers and channel membership."""

from __future__ import annotations

import json
import threading
import time

import pytest
from slack_bolt import App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from devkit.sandbox.slack_api import (
    RunningSlackApi,
    User,
    WorkspaceEvent,
)
from tests.integration.slack_api import TS_RE, FakeClock, api_error, general, section


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
