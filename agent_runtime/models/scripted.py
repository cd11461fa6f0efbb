"""A deterministic model for tests and the demo: answers from a script, counts its calls."""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from agent_runtime.exceptions import ModelError
from agent_runtime.models.base import Message, ModelRequest, ModelResponse, ToolCall, Usage

Responder = Callable[[ModelRequest], ModelResponse]
"""Computes the answer to one request."""


class ScriptExhausted(ModelError):
    """A scripted model was called more times than its script has responses."""

    def __init__(self, name: str, call: int, length: int) -> None:
        super().__init__(
            f"scripted model {name!r} got call {call} but its script holds only "
            f"{length} response(s)",
            retryable=False,
        )
        self.call = call
        self.length = length


class ScriptedModel:
    """Answers from a list of responses (in order) or from a function of the request.

    ``calls`` counts the calls and ``requests`` keeps what each received, so a test can
    assert that a replay made no model call. A response with zero usage gets a
    deterministic estimate: a quarter of the characters sent, and of those answered.
    """

    def __init__(
        self, script: Sequence[ModelResponse] | Responder, *, name: str = "scripted"
    ) -> None:
        self._name = name
        self._responder: Responder | None = None
        self._script: tuple[ModelResponse, ...] = ()
        if callable(script):
            self._responder = script
        else:
            self._script = tuple(script)
        self._lock = threading.Lock()
        self.calls = 0
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        """The configured name."""
        return self._name

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Return the next scripted response, or raise ``ScriptExhausted``."""
        kept = dataclasses.replace(
            request, messages=tuple(request.messages), tools=tuple(request.tools)
        )
        with self._lock:
            self.calls += 1
            self.requests.append(kept)
            call = self.calls
        if self._responder is not None:
            response = self._responder(kept)
        elif call > len(self._script):
            raise ScriptExhausted(self._name, call, len(self._script))
        else:
            response = self._script[call - 1]
        return self._finish(kept, response)

    def _finish(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        """Fill in the model name and, when missing, estimated usage."""
        usage = response.usage
        if usage.total == 0:
            usage = Usage(
                input_tokens=_estimate(_request_text(request)),
                output_tokens=_estimate(_message_text([response.message])),
            )
        # like a real model, it never produces more than it was allowed
        usage = dataclasses.replace(
            usage, output_tokens=min(usage.output_tokens, request.max_output_tokens)
        )
        return dataclasses.replace(response, usage=usage, model=response.model or self._name)


def text_reply(text: str, *, stop_reason: str = "end_turn") -> ModelResponse:
    """Build a scripted answer that is plain text."""
    return ModelResponse(message=Message(role="assistant", content=text), stop_reason=stop_reason)


def tool_reply(*calls: ToolCall, text: str = "", stop_reason: str = "tool_use") -> ModelResponse:
    """Build a scripted answer that proposes ``calls`` (with optional text)."""
    message = Message(role="assistant", content=text, tool_calls=calls)
    return ModelResponse(message=message, stop_reason=stop_reason)


def _estimate(text: str) -> int:
    """Estimate tokens as a quarter of the characters, rounded up."""
    return math.ceil(len(text) / 4)


def _request_text(request: ModelRequest) -> str:
    """All the text a request sends: system prompt, messages and tool specs."""
    tools = [tool.to_json() for tool in request.tools]
    return request.system + _message_text(request.messages) + (_dumps(tools) if tools else "")


def _message_text(messages: Iterable[Message]) -> str:
    """Concatenate message contents and the JSON of their tool calls."""
    parts: list[str] = []
    for message in messages:
        parts.append(message.content)
        parts.extend(_dumps(call.to_json()) for call in message.tool_calls)
    return "".join(parts)


def _dumps(value: Any) -> str:
    """Serialize deterministically."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
