"""The model contract: what the agent loop sends to a model and what it gets back.

Every value here has a JSON form, because model calls are journaled steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call proposed by the model."""

    id: str
    name: str
    arguments: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolCall:
        """Read the JSON form."""
        return cls(id=data["id"], name=data["name"], arguments=data["arguments"])


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One conversation message. ``tool`` messages answer the call ``tool_call_id``."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.is_error:
            data["is_error"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        """Read the JSON form."""
        return cls(
            role=data["role"],
            content=data.get("content", ""),
            tool_calls=tuple(ToolCall.from_json(c) for c in data.get("tool_calls", [])),
            tool_call_id=data.get("tool_call_id"),
            is_error=bool(data.get("is_error", False)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as the model sees it: name, description and JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens a model call consumed."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """Everything one model call sends."""

    system: str
    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    max_output_tokens: int = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """What one model call returned: an assistant message (text and/or tool calls) and usage."""

    message: Message
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    stop_reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form journaled for the call."""
        return {
            "message": self.message.to_json(),
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "model": self.model,
            "stop_reason": self.stop_reason,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelResponse:
        """Read the JSON form."""
        usage = data.get("usage", {})
        return cls(
            message=Message.from_json(data["message"]),
            usage=Usage(
                input_tokens=usage.get("input_tokens", 0),
                output_tokens=usage.get("output_tokens", 0),
            ),
            model=data.get("model", ""),
            stop_reason=data.get("stop_reason", ""),
        )


class Model(Protocol):
    """A chat model that can propose tool calls."""

    @property
    def name(self) -> str:
        """The model's name, as priced in the price table."""
        ...

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one request; raise ``ModelError`` (retryable or not) on failure."""
        ...


@runtime_checkable
class WireModel(Model, Protocol):
    """A model that sends its requests as JSON bodies and can show the body of a request."""

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body ``complete`` sends for ``request``."""
        ...
