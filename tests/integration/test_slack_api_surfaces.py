"""The local Slack's Home tabs and thread statuses, driven by the real ``slack_sdk.WebClient``:
``views.publish`` and ``assistant.threads.setStatus`` answer, and refuse, as Slack does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from devkit.sandbox.slack_api import RunningSlackApi, User, Workspace, start_slack_api


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningSlackApi]:
    """A local Slack Web API on a free loopback port."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with start_slack_api(Workspace()) as running:
        yield running


@pytest.fixture
def client(slack: RunningSlackApi) -> WebClient:
    """A real ``WebClient`` with the bot token."""
    return WebClient(token="xoxb-test", base_url=slack.url + "/api/")


@pytest.fixture
def dana(slack: RunningSlackApi) -> User:
    """A person in the workspace."""
    return slack.workspace.add_user("dana")


def home(text: str = "Nothing is waiting on you.") -> dict[str, Any]:
    """A minimal Home tab."""
    return {
        "type": "home",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }


def error_of(call: Any) -> str:
    """Call, expect Slack's refusal, return its error code."""
    with pytest.raises(SlackApiError) as refused:
        call()
    return str(refused.value.response["error"])


def test_publish_replaces_the_persons_home_tab(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """Each publish replaces the tab whole, keeping its view id; the answer is the view."""
    first = client.views_publish(user_id=dana.id, view=home("one"))["view"]
    second = client.views_publish(user_id=dana.id, view=home("two"))["view"]
    assert first["type"] == "home"
    assert second["id"] == first["id"]
    shown = slack.workspace.home(dana.id)
    assert shown is not None
    assert shown.view["blocks"][0]["text"]["text"] == "two"


def test_publish_refuses_as_slack_does(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """Unknown person, a modal instead of a home view, a stale hash, the tab switched off."""
    assert error_of(lambda: client.views_publish(user_id="U0NOBODY", view=home())) == (
        "user_not_found"
    )
    modal = home() | {"type": "modal"}
    assert error_of(lambda: client.views_publish(user_id=dana.id, view=modal)) == (
        "invalid_arguments"
    )
    client.views_publish(user_id=dana.id, view=home())
    stale = lambda: client.views_publish(user_id=dana.id, view=home(), hash="1.deadbeef")  # noqa: E731
    assert error_of(stale) == "hash_conflict"
    slack.workspace.home_tab_enabled = False
    assert error_of(lambda: client.views_publish(user_id=dana.id, view=home())) == "not_enabled"


def test_set_status_shows_and_clears_a_thread_status(
    slack: RunningSlackApi, client: WebClient
) -> None:
    """A status shows under the thread until an empty status clears it."""
    channel = slack.workspace.resolve_channel("general").id
    root = client.chat_postMessage(channel=channel, text="run")["ts"]
    client.assistant_threads_setStatus(channel_id=channel, thread_ts=root, status="is waiting")
    assert slack.workspace.thread_status(channel, root) == "is waiting"
    client.assistant_threads_setStatus(channel_id=channel, thread_ts=root, status="")
    assert slack.workspace.thread_status(channel, root) == ""
    missing = lambda: client.assistant_threads_setStatus(  # noqa: E731
        channel_id="C0NOWHERE", thread_ts=root, status="x"
    )
    assert error_of(missing) == "channel_not_found"


def test_set_status_needs_chat_write_or_assistant_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """A token with neither scope is told ``missing_scope``, naming the one to add."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with start_slack_api(Workspace(), scopes=("commands",)) as slack:
        client = WebClient(token="xoxb-test", base_url=slack.url + "/api/")
        channel = slack.workspace.resolve_channel("general").id
        with pytest.raises(SlackApiError) as refused:
            client.assistant_threads_setStatus(channel_id=channel, thread_ts="1.000001", status="x")
        assert refused.value.response["error"] == "missing_scope"
        assert refused.value.response["needed"] == "chat:write"
