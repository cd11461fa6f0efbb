"""Build models: the configured one from settings, and others named by a model spec."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from bot.app.settings import Settings, SettingsError

if TYPE_CHECKING:
    from agent_runtime.models import Model


def configured_model(settings: Settings) -> Model | None:
    """Return the model named by the settings, or None for the agent's own scripted model."""
    if settings.model_provider == "scripted":
        return None
    if not settings.model_name:
        raise SettingsError(f"SIGNOFF_MODEL must name the {settings.model_provider} model")
    return _http_model(settings, settings.model_provider, settings.model_name)


MODEL_SPECS = "openai:MODEL, anthropic:MODEL or module:attribute"


def model_from_spec(spec: str, settings: Settings) -> Model:
    """Return the model ``spec`` names; ``ValueError`` says what is wrong with it.

    ``openai:MODEL`` and ``anthropic:MODEL`` take the base URL and key of the configured
    provider (``SIGNOFF_MODEL_PROVIDER``) when it is the same one, else the provider's public
    URL and its key (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``); the public URL without a key
    is refused now rather than by the provider later. ``module:attribute`` names a model
    object, or a function returning one, importable here.
    """
    provider, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"model spec {spec!r}: expected {MODEL_SPECS}")
    if provider in ("openai", "anthropic"):
        return _http_model(settings, provider, name)
    try:
        found = getattr(importlib.import_module(provider), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"model spec {spec!r}: cannot import it ({exc})") from None
    model = found() if callable(found) and not hasattr(found, "complete") else found
    if not hasattr(model, "complete") or not isinstance(getattr(model, "name", None), str):
        raise ValueError(f"model spec {spec!r} does not name a model")
    return model  # type: ignore[no-any-return]


KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def _http_model(settings: Settings, provider: str, name: str) -> Model:
    """The HTTP model of ``provider`` (its adapter, and ``requests``, imported only now)."""
    from agent_runtime.models import (
        ANTHROPIC_BASE_URL,
        OPENAI_BASE_URL,
        AnthropicModel,
        HttpOptions,
        OpenAIChatModel,
    )

    public_url = OPENAI_BASE_URL if provider == "openai" else ANTHROPIC_BASE_URL
    same = settings.model_provider == provider
    base_url = (settings.model_base_url if same else "") or public_url
    api_key = (settings.model_api_key if same else "") or settings.provider_keys.get(provider, "")
    if base_url == public_url and not api_key:
        raise ValueError(
            f"{provider}:{name} needs an API key: set {KEY_VARIABLES[provider]} "
            "(or SIGNOFF_MODEL_API_KEY with SIGNOFF_MODEL_PROVIDER)"
        )
    options = HttpOptions(base_url=base_url, api_key=api_key)
    if provider == "openai":
        return OpenAIChatModel(model=name, options=options)
    return AnthropicModel(model=name, options=options)
