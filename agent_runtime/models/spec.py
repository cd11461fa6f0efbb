"""A model named by a spec string (``openai:gpt-4o-mini``), resolved where it is deployed.

An ``Agent`` may be given ``model="openai:gpt-4o-mini"``: it holds a ``ModelSpec`` until a
``Deployment`` (``signoff``, or ``AgentEnvironment``) swaps it for the provider's model,
built with the deployment's keys and URLs. A spec never resolved refuses to be called.
"""

from __future__ import annotations

from agent_runtime.exceptions import InvalidConfiguration
from agent_runtime.models.base import ModelRequest, ModelResponse

PROVIDERS = ("openai", "anthropic")
"""The providers a spec may name without importing anything (``module:attribute`` also)."""


class ModelSpec:
    """A placeholder model: its ``name`` is the spec's model, its ``complete`` refuses."""

    def __init__(self, spec: str) -> None:
        provider, _, model = spec.partition(":")
        if not provider or not model:
            raise InvalidConfiguration(
                f"model spec {spec!r}: expected openai:MODEL, anthropic:MODEL or module:attribute"
            )
        self.spec = spec
        self._name = model if provider in PROVIDERS else spec

    @property
    def name(self) -> str:
        """The model's name, as priced in the price table (``gpt-4o-mini``)."""
        return self._name

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Refuse: a spec is only a name until a deployment resolves it."""
        raise InvalidConfiguration(
            f"model {self.spec!r} was never resolved: run the agent through a Deployment "
            "(signoff, or AgentEnvironment with a script)"
        )

    def __repr__(self) -> str:
        return f"ModelSpec({self.spec!r})"
