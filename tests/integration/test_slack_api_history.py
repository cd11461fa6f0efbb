"""The local Slack Web API's message metadata, history calls and outage switches, driven by
the real ``slack_sdk.WebClient`` over loopback HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from urllib.error import URLError

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from devkit.sandbox.slack_api import RunningSlackApi, Workspace, start_slack_api

META = {"event_type": "signoff_notice", "event_payload": {"notice": "run:1:root"}}


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningSlackApi]:
    """A local Slack Web API on a free loopback port."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with start_slack_api(Workspace()) as running:
        yield running


@pytest.fixture
def client(slack: RunningSlackApi) -> WebClient:
    """A real ``WebClient`` without automatic retries, pointed at the local API."""
    return WebClient(token="xoxb-test", base_url=slack.api_url, retry_handlers=[], timeout=5)


def test_metadata_is_kept_and_shown_only_when_asked(
    slack: RunningSlackApi, client: WebClient
) -> None:
    """A post's metadata comes back from conversations.history with include_all_metadata."""
    channel = slack.workspace.resolve_channel("general").id
    posted = client.chat_postMessage(channel=channel, text="hello", metadata=META)
    plain = client.conversations_history(channel=channel)["messages"]
    assert [m["ts"] for m in plain] == [posted["ts"]]
    assert "metadata" not in plain[0]
    [found] = client.conversations_history(channel=channel, include_all_metadata=True)["messages"]
    assert found["metadata"] == META
    with pytest.raises(SlackApiError) as refused:
        client.chat_postMessage(channel=channel, text="x", metadata={"event_type": "x"})
    assert refused.value.response["error"] == "invalid_metadata_format"


def test_history_pages_newest_first_and_replies_parent_first(
    slack: RunningSlackApi, client: WebClient
) -> None:
    """History pages newest first with a cursor and ``oldest``; replies start with the parent."""
    channel = slack.workspace.resolve_channel("general").id
    tss = [client.chat_postMessage(channel=channel, text=f"m{i}")["ts"] for i in range(5)]
    replies = [
        client.chat_postMessage(channel=channel, text=f"r{i}", thread_ts=tss[0])["ts"]
        for i in range(3)
    ]
    first = client.conversations_history(channel=channel, limit=2)
    assert [m["text"] for m in first["messages"]] == ["m4", "m3"]
    assert first["has_more"] is True
    second = client.conversations_history(
        channel=channel, limit=10, cursor=first["response_metadata"]["next_cursor"]
    )
    assert [m["text"] for m in second["messages"]] == ["m2", "m1", "m0"]
    assert second["response_metadata"]["next_cursor"] == ""
    since = client.conversations_history(channel=channel, oldest=tss[2])
    assert [m["text"] for m in since["messages"]] == ["m4", "m3"]
    thread = client.conversations_replies(channel=channel, ts=tss[0], oldest=replies[0])
    assert [m["text"] for m in thread["messages"]] == ["m0", "r1", "r2"]
    with pytest.raises(SlackApiError) as missing:
        client.conversations_replies(channel=channel, ts="1.000001")
    assert missing.value.response["error"] == "thread_not_found"


def test_offline_refuses_connections_until_online(
    slack: RunningSlackApi, client: WebClient
) -> None:
    """Offline, calls fail with connection refused; online again, on the same port, they work."""
    port = slack.port
    slack.go_offline()
    with pytest.raises(URLError) as refused:
        client.auth_test()
    assert isinstance(refused.value.reason, ConnectionRefusedError)
    slack.go_online()
    assert slack.port == port
    assert client.auth_test()["ok"] is True


def test_rate_limit_for_a_while_answers_429_with_retry_after(
    slack: RunningSlackApi, client: WebClient
) -> None:
    """During a rate-limit window every call is a 429 carrying Retry-After."""
    slack.workspace.rate_limit_for(60, retry_after=7)
    with pytest.raises(SlackApiError) as limited:
        client.auth_test()
    assert limited.value.response.status_code == 429
    assert limited.value.response.headers["Retry-After"] == "7"
    slack.workspace.rate_limit_for(0)
    assert client.auth_test()["ok"] is True


def test_held_answers_are_sent_on_release(slack: RunningSlackApi, client: WebClient) -> None:
    """A held call's message is posted at once; its answer waits for the release."""
    channel = slack.workspace.resolve_channel("general").id
    slack.workspace.hold_answers("chat.postMessage")
    answers: list[str] = []
    sender = threading.Thread(
        target=lambda: answers.append(
            str(client.chat_postMessage(channel=channel, text="held")["ts"])
        )
    )
    sender.start()
    assert slack.workspace.wait_for(lambda: len(slack.workspace.messages(channel)) == 1, 5.0)
    assert answers == []
    slack.workspace.release_answers("chat.postMessage")
    sender.join(timeout=5)
    assert answers == [slack.workspace.messages(channel)[0].ts]
