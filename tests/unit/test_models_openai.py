"""The OpenAI-compatible Chat Completions model against recorded wire shapes, with no network."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import requests
import responses

from agent_runtime.exceptions import ModelError
from agent_runtime.models import (
    HttpOptions,
    Message,
    Model,
    ModelRequest,
    OpenAIChatModel,
    ToolCall,
    ToolSpec,
    Usage,
)

BASE = "http://llm.test/v1"
URL = f"{BASE}/chat/completions"
KEY = "sk-test-SECRET-0123456789"
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
def model() -> OpenAIChatModel:
    """A model on the mocked provider."""
    return OpenAIChatModel(model="gpt-test", options=HttpOptions(base_url=BASE, api_key=KEY))


def _request() -> ModelRequest:
    """A request with a system prompt and one user message."""
    return ModelRequest(
        system="You are terse.",
        messages=[Message(role="user", content="What is in a.txt?")],
        tools=[READ],
        max_output_tokens=256,
    )


def _completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    """A Chat Completions response body as OpenAI sends it."""
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-test-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", **message},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 42, "completion_tokens": 9, "total_tokens": 51},
    }


def _tool_calls(arguments: str) -> dict[str, Any]:
    """An assistant message proposing one read_file call with the given argument string."""
    return {
        "content": None,
        "tool_calls": [
            {
                "id": "call_abc",
                "type": "function",
                "function": {"name": "read_file", "arguments": arguments},
            }
        ],
    }


def _error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """An OpenAI error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _sent(mock: responses.RequestsMock, index: int = 0) -> dict[str, Any]:
    """The JSON body of the request made at ``index``."""
    body = mock.calls[index].request.body
    assert body is not None
    data: dict[str, Any] = json.loads(body)
    return data


def test_text_answer(mock: responses.RequestsMock, model: OpenAIChatModel) -> None:
    """Content, usage, model and finish reason are read from the response."""
    mock.post(URL, json=_completion({"content": "It says hi."}))
    response = model.complete(_request())
    assert response.message == Message(role="assistant", content="It says hi.")
    assert response.usage == Usage(input_tokens=42, output_tokens=9)
    assert response.model == "gpt-test-2024-08-06"
    assert response.stop_reason == "stop"
    typed: Model = model
    assert typed.name == "gpt-test"


def test_tool_call_answer_parses_arguments(
    mock: responses.RequestsMock, model: OpenAIChatModel
) -> None:
    """JSON-string arguments become a dict on the ToolCall."""
    mock.post(URL, json=_completion(_tool_calls('{"path": "a.txt"}'), finish="tool_calls"))
    response = model.complete(_request())
    assert response.message.content == ""
    assert response.message.tool_calls == (
        ToolCall(id="call_abc", name="read_file", arguments={"path": "a.txt"}),
    )
    assert response.stop_reason == "tool_calls"


def test_request_body_and_headers(mock: responses.RequestsMock, model: OpenAIChatModel) -> None:
    """System first, assistant tool_calls with string arguments, tool results by id, tools."""
    mock.post(URL, json=_completion({"content": "ok"}))
    request = ModelRequest(
        system="You are terse.",
        messages=[
            Message(role="user", content="Read a.txt and b.txt"),
            Message(
                role="assistant",
                content="",
                tool_calls=(
                    ToolCall(id="call_1", name="read_file", arguments={"path": "a.txt"}),
                    ToolCall(id="call_2", name="read_file", arguments={"path": "b.txt"}),
                ),
            ),
            Message(role="tool", tool_call_id="call_1", content="hi"),
            Message(role="tool", tool_call_id="call_2", content="no such file", is_error=True),
        ],
        tools=[READ],
        max_output_tokens=256,
    )
    model.complete(request)
    assert _sent(mock) == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Read a.txt and b.txt"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "b.txt"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "hi"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Error: no such file"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "description": "Read a file.",
                    "parameters": READ.parameters,
                },
            }
        ],
        "max_tokens": 256,
    }
    headers = mock.calls[0].request.headers
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["Content-Type"] == "application/json"


def test_no_tools_and_no_key(mock: responses.RequestsMock) -> None:
    """Without tools the key is omitted; without an API key no Authorization is sent."""
    mock.post(URL, json=_completion({"content": "ok"}))
    local = OpenAIChatModel(
        model="llama3",
        options=HttpOptions(base_url=BASE + "/"),
        max_tokens_field="max_completion_tokens",
    )
    local.complete(ModelRequest(system="", messages=[Message(role="user", content="hi")]))
    assert _sent(mock) == {
        "model": "llama3",
        "messages": [{"role": "user", "content": "hi"}],
        "max_completion_tokens": 1024,
    }
    assert "Authorization" not in mock.calls[0].request.headers


def test_429_is_one_retryable_attempt_carrying_its_retry_after(
    mock: responses.RequestsMock, model: OpenAIChatModel
) -> None:
    """A rate limit is one request, a retryable error asking for the Retry-After pause."""
    mock.post(
        URL, status=429, headers={"Retry-After": "3"}, json=_error("Rate limit reached", "requests")
    )
    with pytest.raises(ModelError) as info:
        model.complete(_request())
    assert len(mock.calls) == 1
    assert info.value.retryable is True
    assert info.value.retry_after == timedelta(seconds=3)


def test_500_is_one_retryable_attempt(mock: responses.RequestsMock, model: OpenAIChatModel) -> None:
    """A server error is one request and a retryable error; the step's policy retries."""
    mock.post(URL, status=500, json=_error("The server had an error", "server_error"))
    with pytest.raises(ModelError) as info:
        model.complete(_request())
    assert len(mock.calls) == 1
    assert info.value.status == 500
    assert info.value.retryable is True
    assert info.value.retry_after is None
    assert "The server had an error" in str(info.value)


def test_400_is_not_retried(mock: responses.RequestsMock, model: OpenAIChatModel) -> None:
    """A bad request fails at once, naming the provider's message but never the key."""
    mock.post(URL, status=400, json=_error(f"Invalid 'messages[1].content': bad value (key {KEY})"))
    with pytest.raises(ModelError) as info:
        model.complete(_request())
    message = str(info.value)
    assert len(mock.calls) == 1
    assert info.value.status == 400
    assert info.value.retryable is False
    assert "invalid_request_error: Invalid 'messages[1].content': bad value" in message
    assert KEY not in message
    assert "\n" not in message


def test_401_message_never_contains_the_key(
    mock: responses.RequestsMock, model: OpenAIChatModel
) -> None:
    """An authentication error echoing the key is masked."""
    mock.post(URL, status=401, json=_error(f"Incorrect API key provided: {KEY}."))
    with pytest.raises(ModelError) as info:
        model.complete(_request())
    assert KEY not in str(info.value)
    assert "Incorrect API key provided: ***." in str(info.value)
    assert info.value.retryable is False


def test_connection_errors_give_up_retryable(
    mock: responses.RequestsMock, model: OpenAIChatModel
) -> None:
    """A refused connection is one retryable error without a status."""
    mock.post(URL, body=requests.ConnectionError("connection refused"))
    with pytest.raises(ModelError, match="ConnectionError") as info:
        model.complete(_request())
    assert info.value.status is None
    assert info.value.retryable is True
    assert len(mock.calls) == 1


def test_malformed_tool_arguments_are_kept_raw(
    mock: responses.RequestsMock, model: OpenAIChatModel
) -> None:
    """Arguments that are not a JSON object arrive as {"_raw": ...} and go back verbatim."""
    mock.post(URL, json=_completion(_tool_calls('{"path": "a.txt"'), finish="tool_calls"))
    mock.post(URL, json=_completion({"content": "sorry"}))
    response = model.complete(_request())
    (call,) = response.message.tool_calls
    assert call.arguments == {"_raw": '{"path": "a.txt"'}
    follow_up = ModelRequest(
        system="",
        messages=[
            response.message,
            Message(
                role="tool", tool_call_id=call.id, content="arguments are not JSON", is_error=True
            ),
        ],
    )
    model.complete(follow_up)
    sent_call = _sent(mock, 1)["messages"][0]["tool_calls"][0]
    assert sent_call["function"]["arguments"] == '{"path": "a.txt"'


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("", {}),
        ("[1, 2]", {"_raw": "[1, 2]"}),
        ("not json", {"_raw": "not json"}),
    ],
)
def test_argument_edge_cases(
    mock: responses.RequestsMock, model: OpenAIChatModel, raw: str, parsed: dict[str, Any]
) -> None:
    """Empty arguments mean none; JSON that is not an object is kept raw."""
    mock.post(URL, json=_completion(_tool_calls(raw), finish="tool_calls"))
    assert model.complete(_request()).message.tool_calls[0].arguments == parsed


def test_response_without_choices_is_an_error(
    mock: responses.RequestsMock, model: OpenAIChatModel
) -> None:
    """A 200 body that is not a completion fails clearly and is not retried."""
    mock.post(URL, json={"id": "x", "choices": []})
    with pytest.raises(ModelError, match="malformed response") as info:
        model.complete(_request())
    assert info.value.retryable is False


def test_error_payload_in_a_200_is_an_error(
    mock: responses.RequestsMock, model: OpenAIChatModel
) -> None:
    """Some compatible servers answer 200 with an error object; it is raised."""
    mock.post(URL, json={"error": {"message": "model not loaded", "type": "server"}})
    with pytest.raises(ModelError, match="model not loaded"):
        model.complete(_request())


def test_non_json_error_body(mock: responses.RequestsMock, model: OpenAIChatModel) -> None:
    """A proxy's HTML error page is reduced to one line."""
    mock.post(URL, status=404, body="<html>\n<h1>Not Found</h1>\n</html>")
    with pytest.raises(ModelError, match="HTTP 404: <html> <h1>Not Found</h1> </html>"):
        model.complete(_request())
