"""What the local Slack Web API refuses, as Slack does: wrong tokens, rate limits, scripted
errors, unknown methods and messages over the Block Kit limits."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from devkit.sandbox.slack_api import (
    RunningSlackApi,
)
from tests.integration.slack_api import api_error, general, section


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


def test_unknown_method_is_refused(client: WebClient) -> None:
    """A method the API does not serve answers unknown_method."""
    with pytest.raises(SlackApiError) as exc:
        client.api_call("reactions.add", params={"name": "eyes"})
    assert api_error(exc) == "unknown_method"


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
