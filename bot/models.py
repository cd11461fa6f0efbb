"""Build the configured model from settings."""

from __future__ import annotations

from agent_runtime.models import (
    ANTHROPIC_BASE_URL,
    OPENAI_BASE_URL,
    AnthropicModel,
    HttpOptions,
    Model,
    OpenAIChatModel,
)
from bot.settings import Settings, SettingsError


def configured_model(settings: Settings) -> Model | None:
    """Return the model named by the settings, or None for the agent's own scripted model."""
    if settings.model_provider == "scripted":
        return None
    if not settings.model_name:
        raise SettingsError(f"SIGNOFF_MODEL must name the {settings.model_provider} model")
    if settings.model_provider == "openai":
        options = HttpOptions(base_url=settings.model_base_url or OPENAI_BASE_URL,
                              api_key=settings.model_api_key)
        return OpenAIChatModel(model=settings.model_name, options=options)
    options = HttpOptions(base_url=settings.model_base_url or ANTHROPIC_BASE_URL,
                          api_key=settings.model_api_key)
    return AnthropicModel(model=settings.model_name, options=options)
