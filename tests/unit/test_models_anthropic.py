"""The Anthropic Messages model against recorded wire shapes, with no network."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import responses

from agent_runtime.exceptions import ModelError
from agent_runtime.models import (
    AnthropicModel,
    HttpOptions,
    Message,
    Model,
    ModelRequest,
    ToolCall,
    ToolSpec,
    Usage,
)

BASE = "http://claude.test"
URL = f"{BASE}/v1/messages"
KEY = "sk-ant-test-SECRET-0123456789"
READ = ToolSpec(
    name="read_file",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    """Intercept every HTTP request made through requests."""
    with responses.RequestsMock() as rsps:
        yield rsps


@pytest.fixture
def model() -> AnthropicModel:
    """A model on the mocked provider."""
    return AnthropicModel(model="claude-test", options=HttpOptions(base_url=BASE, api_key=KEY))


def _request() -> ModelRequest:
    """A request with a system prompt, one user message and one tool."""
    return ModelRequest(
        system="You are terse.",
        messages=[Message(role="user", content="What is in a.txt?")],
        tools=[READ],
        max_output_tokens=256,
    )


def _message(content: list[dict[str, Any]], stop: str = "end_turn") -> dict[str, Any]:
    """A Messages response body as Anthropic sends it."""
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-20250101",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 42, "output_tokens": 9},
    }


def _error(kind: str, message: str) -> dict[str, Any]:
    """An Anthropic error body."""
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_01"}


def _tool_use(arguments: Any) -> dict[str, Any]:
    """A tool_use block calling read_file."""
    return {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": arguments}


def _sent(mock: responses.RequestsMock, index: int = 0) -> dict[str, Any]:
    """The JSON body of the request made at ``index``."""
    body = mock.calls[index].request.body
    assert body is not None
    data: dict[str, Any] = json.loads(body)
    return data


def test_text_answer(mock: responses.RequestsMock, model: AnthropicModel) -> None:
    """Text blocks are joined; usage, model and stop reason are read."""
    mock.post(
        URL, json=_message([{"type": "text", "text": "It says "}, {"type": "text", "text": "hi."}])
    )
    response = model.complete(_request())
    assert response.message == Message(role="assistant", content="It says hi.")
    assert response.usage == Usage(input_tokens=42, output_tokens=9)
    assert response.model == "claude-test-20250101"
    assert response.stop_reason == "end_turn"
    typed: Model = model
    assert typed.name == "claude-test"


def test_tool_use_answer(mock: responses.RequestsMock, model: AnthropicModel) -> None:
    """A tool_use block becomes a ToolCall; text before it is kept."""
    mock.post(
        URL,
        json=_message(
            [{"type": "text", "text": "Reading it."}, _tool_use({"path": "a.txt"})], stop="tool_use"
        ),
    )
    response = model.complete(_request())
    assert response.message.content == "Reading it."
    assert response.message.tool_calls == (
        ToolCall(id="toolu_01", name="read_file", arguments={"path": "a.txt"}),
    )
    assert response.stop_reason == "tool_use"


def test_cached_input_tokens_are_counted(
    mock: responses.RequestsMock, model: AnthropicModel
) -> None:
    """Prompt-cache reads and writes count as input tokens."""
    body = _message([{"type": "text", "text": "ok"}])
    body["usage"] = {
        "input_tokens": 5,
        "output_tokens": 2,
        "cache_creation_input_tokens": 10,
        "cache_read_input_tokens": 20,
    }
    mock.post(URL, json=body)
    assert model.complete(_request()).usage == Usage(input_tokens=35, output_tokens=2)


def test_request_body_and_headers(mock: responses.RequestsMock, model: AnthropicModel) -> None:
    """System on top, tool_use blocks, consecutive tool results merged into one user turn."""
    mock.post(URL, json=_message([{"type": "text", "text": "ok"}]))
    request = ModelRequest(
        system="You are terse.",
        messages=[
            Message(role="user", content="Read a.txt and b.txt"),
            Message(
                role="assistant",
                content="Reading both.",
                tool_calls=(
                    ToolCall(id="toolu_1", name="read_file", arguments={"path": "a.txt"}),
                    ToolCall(id="toolu_2", name="read_file", arguments={"path": "b.txt"}),
                ),
            ),
            Message(role="tool", tool_call_id="toolu_1", content="hi"),
            Message(role="tool", tool_call_id="toolu_2", content="no such file", is_error=True),
            Message(role="user", content="Summarize."),
        ],
        tools=[READ],
        max_output_tokens=256,
    )
    model.complete(request)
    assert _sent(mock) == {
        "model": "claude-test",
        "max_tokens": 256,
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": "Read a.txt and b.txt"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading both."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "read_file",
                        "input": {"path": "a.txt"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "read_file",
                        "input": {"path": "b.txt"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "hi",
                        "is_error": False,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "no such file",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Summarize."},
                ],
            },
        ],
        "tools": [
            {"name": "read_file", "description": "Read a file.", "input_schema": READ.parameters}
        ],
    }
    headers = mock.calls[0].request.headers
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["Content-Type"] == "application/json"
    assert "Authorization" not in headers


def test_tool_calls_without_text_send_no_empty_text_block(
    mock: responses.RequestsMock, model: AnthropicModel
) -> None:
    """An assistant turn with only tool calls has only tool_use blocks; no system, no tools."""
    mock.post(URL, json=_message([{"type": "text", "text": "ok"}]))
    call = ToolCall(id="toolu_1", name="read_file", arguments={"path": "a.txt"})
    model.complete(
        ModelRequest(
            system="",
            messages=[
                Message(role="user", content="go"),
                Message(role="assistant", tool_calls=(call,)),
                Message(role="tool", tool_call_id="toolu_1", content="hi"),
            ],
        )
    )
    sent = _sent(mock)
    assert set(sent) == {"model", "max_tokens", "messages"}
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}}
        ],
    }


def test_429_is_one_retryable_attempt_carrying_its_retry_after(
    mock: responses.RequestsMock, model: AnthropicModel
) -> None:
    """A rate limit is one request, a retryable error asking for the retry-after pause."""
    mock.post(
        URL,
        status=429,
        headers={"retry-after": "2"},
        json=_error("rate_limit_error", "Number of request tokens has exceeded your rate"),
    )
    with pytest.raises(ModelError) as info:
        model.complete(_request())
    assert len(mock.calls) == 1
    assert info.value.retry_after == timedelta(seconds=2)


def test_529_overloaded_is_one_retryable_attempt(
    mock: responses.RequestsMock, model: AnthropicModel
) -> None:
    """Overload is transient: one request, a retryable error for the step's policy."""
    mock.post(URL, status=529, json=_error("overloaded_error", "Overloaded"))
    with pytest.raises(ModelError) as info:
        model.complete(_request())
    assert len(mock.calls) == 1
    assert info.value.status == 529
    assert info.value.retryable is True
    assert "overloaded_error: Overloaded" in str(info.value)


def test_400_is_not_retried(mock: responses.RequestsMock, model: AnthropicModel) -> None:
    """A bad request fails at once with the provider's message and without the key."""
    mock.post(
        URL,
        status=400,
        json=_error("invalid_request_error", "messages: text content blocks must be non-empty"),
    )
    with pytest.raises(ModelError) as info:
        model.complete(_request())
    message = str(info.value)
    assert len(mock.calls) == 1
    assert info.value.status == 400
    assert info.value.retryable is False
    assert message == (
        "anthropic: HTTP 400: invalid_request_error: "
        "messages: text content blocks must be non-empty"
    )
    assert KEY not in message


def test_malformed_tool_input_is_kept_raw(
    mock: responses.RequestsMock, model: AnthropicModel
) -> None:
    """A tool_use input that is not a JSON object arrives as {"_raw": ...} for validation."""
    mock.post(URL, json=_message([_tool_use('{"path": ')], stop="tool_use"))
    (call,) = model.complete(_request()).message.tool_calls
    assert call.arguments == {"_raw": '{"path": '}


def test_tool_use_without_input_has_no_arguments(
    mock: responses.RequestsMock, model: AnthropicModel
) -> None:
    """A tool_use block with an empty input means a call without arguments."""
    mock.post(URL, json=_message([_tool_use({})], stop="tool_use"))
    assert model.complete(_request()).message.tool_calls[0].arguments == {}


def test_response_without_content_is_an_error(
    mock: responses.RequestsMock, model: AnthropicModel
) -> None:
    """A 200 body that is not a message fails clearly and is not retried."""
    mock.post(URL, json={"id": "msg_01", "type": "message"})
    with pytest.raises(ModelError, match="anthropic: malformed response") as info:
        model.complete(_request())
    assert info.value.retryable is False
    assert len(mock.calls) == 1
