"""Models the agent loop can call: the contract, a scripted fake, and two HTTP providers."""

from agent_runtime.models.anthropic import ANTHROPIC_BASE_URL, ANTHROPIC_VERSION, AnthropicModel
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
from agent_runtime.models.http import HttpOptions, post_json
from agent_runtime.models.openai_chat import OPENAI_BASE_URL, RAW_ARGUMENTS_KEY, OpenAIChatModel
from agent_runtime.models.scripted import (
    Responder,
    ScriptedModel,
    ScriptExhausted,
    text_reply,
    tool_reply,
)

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
