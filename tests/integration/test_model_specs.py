"""Agents given a model spec string: resolved with the deployment's keys, refused early."""

from __future__ import annotations

from pathlib import Path

import pytest
import responses

from agent_runtime import Agent, Budget, InvalidConfiguration, Tools
from agent_runtime.models import ModelRequest, ModelSpec, OpenAIChatModel
from agent_runtime.models.base import Message
from bot.app.settings import Settings
from bot.app.wiring import build_services
from tests.integration import run_cli, signoff_env

OPENAI_URL = "https://api.openai.com/v1/chat/completions"


def spec_agent() -> Agent:
    """An agent whose model is named by a spec, with a cost budget priced by that name."""
    return Agent(
        name="speccy",
        model="openai:gpt-4o-mini",
        system_prompt="answer",
        tools=Tools(),
        budget=Budget(cost_usd=0.1),
    )


def _request() -> ModelRequest:
    return ModelRequest(system="answer", messages=(Message(role="user", content="hi"),), tools=())


def test_a_spec_is_a_named_model_that_refuses_until_resolved() -> None:
    """A spec string becomes a ModelSpec priced by its model name, which cannot be called."""
    agent = spec_agent()
    assert isinstance(agent.model, ModelSpec)
    assert agent.llm.name == "gpt-4o-mini"
    with pytest.raises(InvalidConfiguration, match="never resolved"):
        agent.llm.complete(_request())


@responses.activate
def test_the_deployment_resolves_a_spec_with_the_providers_key(sqlite_url: str) -> None:
    """With OPENAI_API_KEY the spec becomes the OpenAI model on its public URL, with the key."""
    responses.post(
        OPENAI_URL,
        json={
            "model": "gpt-4o-mini",
            "choices": [{"message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        },
    )
    settings = Settings(
        database_url=sqlite_url,
        agent=f"{__name__}:spec_agent",
        provider_keys={"openai": "sk-test-key"},
    )
    agent = build_services(settings).agents.get()
    assert isinstance(agent.llm, OpenAIChatModel)
    assert agent.llm.complete(_request()).message.content == "hello"
    assert responses.calls[0].request.headers["Authorization"] == "Bearer sk-test-key"


def test_a_spec_without_a_key_stops_the_worker_before_any_run(tmp_path: Path) -> None:
    """No OPENAI_API_KEY: the worker exits 2 at start, naming the variable to set."""
    env = signoff_env(
        f"sqlite:///{tmp_path / 'signoff.db'}",
        extra={"SIGNOFF_DEMO": "0", "SIGNOFF_AGENT": f"{__name__}:spec_agent"},
    )
    env.pop("OPENAI_API_KEY", None)
    done = run_cli(env, "worker", "--until-idle")
    assert done.returncode == 2
    assert "openai:gpt-4o-mini needs an API key: set OPENAI_API_KEY" in done.stderr
