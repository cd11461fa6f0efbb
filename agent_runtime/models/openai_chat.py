"""OpenAI-compatible Chat Completions (OpenAI, vLLM, Ollama, LiteLLM, ...).

Tool-call arguments arrive as a JSON string. Arguments that are not a JSON object are kept as
``{"_raw": "<the string>"}``: argument validation then rejects the call and the model is told,
instead of the whole model step failing.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import requests

from agent_runtime.exceptions import ModelError, UnsafeJson
from agent_runtime.json_limits import refused_arguments, strict_loads
from agent_runtime.models.base import Message, ModelRequest, ModelResponse, ToolCall, Usage
from agent_runtime.models.http import HttpOptions, post_json

OPENAI_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's own endpoint; servers such as vLLM or Ollama serve the same API at ``.../v1``."""

RAW_ARGUMENTS_KEY = "_raw"
"""Key holding tool-call arguments that were not a JSON object."""

ERROR_PREFIX = "Error: "
"""Prepended to a failed tool result, since Chat Completions has no error flag."""


class OpenAIChatModel:
    """A model behind ``POST {base_url}/chat/completions`` with bearer-key authentication."""

    def __init__(
        self,
        *,
        model: str,
        options: HttpOptions,
        session: requests.Session | None = None,
        max_tokens_field: str = "max_tokens",
    ) -> None:
        self._model = model
        self._options = options
        self._session = session or requests.Session()
        self._max_tokens_field = max_tokens_field

    @property
    def name(self) -> str:
        """The model id sent to the provider."""
        return self._model

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one chat completion; raise ``ModelError`` on failure."""
        key = self._options.api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        data = post_json(
            self._session,
            self._options.url("chat/completions"),
            self.wire_body(request),
            headers=headers,
            options=self._options,
            provider="openai",
        )
        return parse_response(data, default_model=self._model)

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body ``complete`` sends for ``request``."""
        return request_body(self._model, request, max_tokens_field=self._max_tokens_field)


def request_body(
    model: str, request: ModelRequest, *, max_tokens_field: str = "max_tokens"
) -> dict[str, Any]:
    """Build the Chat Completions request body."""
    messages = [{"role": "system", "content": request.system}] if request.system else []
    messages.extend(_message(m) for m in request.messages)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    body[max_tokens_field] = request.max_output_tokens
    return body


def parse_response(data: dict[str, Any], *, default_model: str) -> ModelResponse:
    """Read a Chat Completions response body."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
        calls = tuple(_tool_call(c) for c in message.get("tool_calls") or ())
        usage = data.get("usage") or {}
        return ModelResponse(
            message=Message(
                role="assistant", content=_text(message.get("content")), tool_calls=calls
            ),
            usage=Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            ),
            model=str(data.get("model") or default_model),
            stop_reason=str(choice.get("finish_reason") or ""),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ModelError(f"openai: malformed response: {type(exc).__name__}: {exc}") from exc


def _message(message: Message) -> dict[str, Any]:
    """Map one conversation message."""
    if message.role == "tool":
        if message.tool_call_id is None:
            raise ModelError("openai: a tool message has no tool_call_id")
        content = ERROR_PREFIX + message.content if message.is_error else message.content
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments_json(c.arguments)},
                }
                for c in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _arguments_json(arguments: dict[str, Any]) -> str:
    """Encode arguments; unparsed ones are sent back exactly as the model wrote them."""
    raw = arguments.get(RAW_ARGUMENTS_KEY)
    if len(arguments) == 1 and isinstance(raw, str):
        return raw
    return json.dumps(arguments, sort_keys=True)


def _tool_call(call: dict[str, Any]) -> ToolCall:
    """Read one tool call; its id is invented when a server leaves it out."""
    function = call["function"]
    call_id = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
    return ToolCall(
        id=str(call_id),
        name=str(function["name"]),
        arguments=parse_arguments(function.get("arguments")),
    )


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Decode tool arguments; anything but a JSON object becomes ``{"_raw": "<text>"}``.

    Shared with the Anthropic mapping, whose ``input`` is normally already an object.
    """
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        value = strict_loads(text)
    except UnsafeJson as exc:
        return refused_arguments(exc.problem)
    except ValueError:
        return {RAW_ARGUMENTS_KEY: text}
    return value if isinstance(value, dict) else {RAW_ARGUMENTS_KEY: text}


def _text(content: Any) -> str:
    """Read message content: a string, null, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)
