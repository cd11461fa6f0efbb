"""The scripted model: answers in order or from a function, counts calls, estimates usage."""

from __future__ import annotations

import pytest

from agent_runtime.exceptions import ModelError
from agent_runtime.models import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ScriptExhausted,
    ToolCall,
    ToolSpec,
    Usage,
    text_reply,
    tool_reply,
)


def _request(text: str = "hello") -> ModelRequest:
    """A one-message request."""
    return ModelRequest(system="be brief", messages=[Message(role="user", content=text)])


def test_returns_the_script_in_order_and_counts_calls() -> None:
    """Each call gets the next response; calls and requests are recorded."""
    call = ToolCall(id="c1", name="read", arguments={"path": "a.txt"})
    model = ScriptedModel([tool_reply(call), text_reply("done")])
    first = model.complete(_request("one"))
    second = model.complete(_request("two"))
    assert first.message.tool_calls == (call,)
    assert second.message.content == "done"
    assert model.calls == 2
    assert [r.messages[0].content for r in model.requests] == ["one", "two"]


def test_zero_calls_until_asked() -> None:
    """A fresh model reports no calls, which is what replay tests assert."""
    model = ScriptedModel([text_reply("unused")])
    assert model.calls == 0
    assert model.requests == []


def test_running_out_of_script_is_a_clear_non_retryable_error() -> None:
    """A call beyond the script raises ScriptExhausted naming the call and script length."""
    model = ScriptedModel([text_reply("only")], name="demo")
    model.complete(_request())
    with pytest.raises(ScriptExhausted, match=r"'demo' got call 2 .* only 1 response") as info:
        model.complete(_request())
    assert isinstance(info.value, ModelError)
    assert info.value.retryable is False
    assert model.calls == 2


def test_answers_from_a_function_of_the_request() -> None:
    """A responder function sees each request and computes the answer."""
    model = ScriptedModel(lambda r: text_reply(f"echo {r.messages[-1].content}"))
    assert model.complete(_request("ping")).message.content == "echo ping"
    assert model.complete(_request("pong")).message.content == "echo pong"
    assert model.calls == 2


def test_estimates_usage_deterministically_when_the_script_gives_none() -> None:
    """Missing usage becomes a quarter of the characters, rounded up, on both sides."""
    model = ScriptedModel([text_reply("abcdefgh")])
    request = ModelRequest(system="sys", messages=[Message(role="user", content="hello")])
    response = model.complete(request)
    assert response.usage == Usage(input_tokens=2, output_tokens=2)


def test_counts_tool_specs_and_tool_calls_in_the_estimate() -> None:
    """Tool specs in the request and tool calls in the answer add to the estimate."""
    spec = ToolSpec(name="read", description="Read a file.", parameters={"type": "object"})
    request = ModelRequest(system="", messages=[Message(role="user", content="")], tools=[spec])
    call = ToolCall(id="c1", name="read", arguments={})
    response = ScriptedModel([tool_reply(call)]).complete(request)
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0


def test_keeps_usage_and_model_given_by_the_script() -> None:
    """Explicit usage and model name pass through unchanged."""
    given = ModelResponse(
        message=Message(role="assistant", content="x"),
        usage=Usage(input_tokens=100, output_tokens=7),
        model="gpt-x",
    )
    response = ScriptedModel([given]).complete(_request())
    assert response.usage == Usage(input_tokens=100, output_tokens=7)
    assert response.model == "gpt-x"


def test_name_defaults_to_scripted_and_fills_the_model_field() -> None:
    """The name is configurable and used as the response's model when none is given."""
    assert ScriptedModel([]).name == "scripted"
    model = ScriptedModel([text_reply("hi")], name="fake-1")
    assert model.name == "fake-1"
    assert model.complete(_request()).model == "fake-1"


def test_recorded_requests_do_not_change_when_the_caller_mutates_its_list() -> None:
    """Requests are stored with their message list copied."""
    messages = [Message(role="user", content="first")]
    model = ScriptedModel([text_reply("ok")])
    model.complete(ModelRequest(system="", messages=messages))
    messages.append(Message(role="user", content="later"))
    assert len(model.requests[0].messages) == 1


def test_satisfies_the_model_protocol() -> None:
    """A ScriptedModel can be used wherever a Model is expected."""
    model: Model = ScriptedModel([text_reply("ok")])
    assert model.complete(_request()).message.role == "assistant"
