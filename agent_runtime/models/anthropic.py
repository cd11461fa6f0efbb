"""Anthropic's Messages API.

The system prompt is the top-level ``system``; tool results travel as ``tool_result`` blocks in
a user message, and consecutive messages of the same side are merged into one turn, since the
API expects user and assistant turns to alternate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import requests

from agent_runtime.exceptions import ModelError
from agent_runtime.models.base import Message, ModelRequest, ModelResponse, ToolCall, Usage
from agent_runtime.models.http import HttpOptions, post_json
from agent_runtime.models.openai_chat import parse_arguments

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
"""Anthropic's endpoint; requests go to ``{base_url}/v1/messages``."""

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header this mapping is written against."""


class AnthropicModel:
    """A model behind ``POST {base_url}/v1/messages`` authenticated with ``x-api-key``."""

    def __init__(
        self,
        *,
        model: str,
        options: HttpOptions,
        session: requests.Session | None = None,
        version: str = ANTHROPIC_VERSION,
    ) -> None:
        self._model = model
        self._options = options
        self._session = session or requests.Session()
        self._version = version

    @property
    def name(self) -> str:
        """The model id sent to the provider."""
        return self._model

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one Messages request; raise ``ModelError`` on failure."""
        headers = {"x-api-key": self._options.api_key, "anthropic-version": self._version}
        data = post_json(
            self._session,
            self._options.url("v1/messages"),
            self.wire_body(request),
            headers=headers,
            options=self._options,
            provider="anthropic",
        )
        return parse_response(data, default_model=self._model)

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body ``complete`` sends for ``request``."""
        return request_body(self._model, request)


def request_body(model: str, request: ModelRequest) -> dict[str, Any]:
    """Build the Messages request body."""
    body: dict[str, Any] = {"model": model, "max_tokens": request.max_output_tokens}
    if request.system:
        body["system"] = request.system
    body["messages"] = _turns(request.messages)
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    return body


def parse_response(data: dict[str, Any], *, default_model: str) -> ModelResponse:
    """Read a Messages response body."""
    try:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in data["content"]:
            if block["type"] == "text":
                texts.append(str(block["text"]))
            elif block["type"] == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(block["id"]),
                        name=str(block["name"]),
                        arguments=parse_arguments(block.get("input")),
                    )
                )
        return ModelResponse(
            message=Message(role="assistant", content="".join(texts), tool_calls=tuple(calls)),
            usage=_usage(data.get("usage") or {}),
            model=str(data.get("model") or default_model),
            stop_reason=str(data.get("stop_reason") or ""),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ModelError(f"anthropic: malformed response: {type(exc).__name__}: {exc}") from exc


def _usage(usage: dict[str, Any]) -> Usage:
    """Count input tokens including any read from or written to the prompt cache."""
    cached = sum(
        int(usage.get(k) or 0) for k in ("cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return Usage(
        input_tokens=int(usage.get("input_tokens") or 0) + cached,
        output_tokens=int(usage.get("output_tokens") or 0),
    )


def _turns(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Group messages into alternating user/assistant turns of content blocks."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        side = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if turns and turns[-1][0] == side:
            turns[-1][1].extend(blocks)
        else:
            turns.append((side, blocks))
    return [{"role": side, "content": _content(blocks)} for side, blocks in turns]


def _blocks(message: Message) -> list[dict[str, Any]]:
    """Map one message to content blocks; empty text is left out, as the API rejects it."""
    if message.role == "tool":
        if message.tool_call_id is None:
            raise ModelError("anthropic: a tool message has no tool_call_id")
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
                "is_error": message.is_error,
            }
        ]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(
        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
        for c in message.tool_calls
    )
    return blocks


def _content(blocks: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Send a lone text block (or nothing) as a plain string."""
    if not blocks:
        return ""
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return str(blocks[0]["text"])
    return blocks
