"""Models the agent loop can call: the contract, a scripted fake, and two HTTP providers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_runtime.lazy_exports import lazy_exports
from agent_runtime.models.base import (
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    Role,
    ToolCall,
    ToolSpec,
    Usage,
)
from agent_runtime.models.scripted import (
    Responder,
    ScriptedModel,
    ScriptExhausted,
    text_reply,
    tool_reply,
)
from agent_runtime.models.spec import ModelSpec

if TYPE_CHECKING:
    from agent_runtime.models.anthropic import (
        ANTHROPIC_BASE_URL,
        ANTHROPIC_VERSION,
        AnthropicModel,
    )
    from agent_runtime.models.http import HttpOptions, post_json
    from agent_runtime.models.openai_chat import (
        OPENAI_BASE_URL,
        RAW_ARGUMENTS_KEY,
        OpenAIChatModel,
    )

_HTTP_ADAPTERS = {
    "ANTHROPIC_BASE_URL": "anthropic",
    "ANTHROPIC_VERSION": "anthropic",
    "AnthropicModel": "anthropic",
    "HttpOptions": "http",
    "post_json": "http",
    "OPENAI_BASE_URL": "openai_chat",
    "RAW_ARGUMENTS_KEY": "openai_chat",
    "OpenAIChatModel": "openai_chat",
}


__getattr__ = lazy_exports(__name__, _HTTP_ADAPTERS, globals())


__all__ = [
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_VERSION",
    "OPENAI_BASE_URL",
    "RAW_ARGUMENTS_KEY",
    "AnthropicModel",
    "HttpOptions",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSpec",
    "OpenAIChatModel",
    "Responder",
    "Role",
    "ScriptExhausted",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "post_json",
    "text_reply",
    "tool_reply",
]
