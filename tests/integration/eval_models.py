"""Models and agents for the eval tests, loaded by model spec or ``SIGNOFF_AGENT``.

``changed_model`` is the demo's rule-based model changed in one known place: for order 1045
it proposes half the refund. ``terse_agent`` is the demo agent under another name and
prompt. ``tripwire_agent`` is the demo agent whose tools, if ever called, write to the file
``SIGNOFF_TEST_TRIPWIRE`` names and fail.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_runtime import Agent, Tool, Tools
from agent_runtime.models import ModelRequest, ModelResponse, ScriptedModel, ToolCall
from bot.app.settings import Settings
from devkit.demo.agent import demo_agent
from devkit.demo.model import demo_model, respond

TRIPWIRE_ENV = "SIGNOFF_TEST_TRIPWIRE"
CHANGED_ORDER = "1045"


def same_model() -> ScriptedModel:
    """The demo model, unchanged."""
    return demo_model()


def changed_model() -> ScriptedModel:
    """The demo model, but refunding half of order 1045 (under the same priced name)."""
    return ScriptedModel(_halving, name="demo-scripted")


def _halving(request: ModelRequest) -> ModelResponse:
    response = respond(request)
    calls = tuple(_halved(c) for c in response.message.tool_calls)
    return replace(response, message=replace(response.message, tool_calls=calls))


def _halved(call: ToolCall) -> ToolCall:
    if call.name != "issue_refund" or call.arguments["order_id"] != CHANGED_ORDER:
        return call
    arguments = call.arguments | {"amount_cents": call.arguments["amount_cents"] // 2}
    return replace(call, arguments=arguments)


def terse_agent() -> Agent:
    """The demo agent under another name and system prompt: a prompt change to evaluate."""
    settings = Settings.from_env()
    agent = demo_agent(provider_url=settings.demo_provider_url, approvers=settings.approvers)
    return replace(agent, name="demo-terse", system_prompt="Be brief. " + agent.system_prompt)


def unguarded_agent() -> Agent:
    """Another agent whose ``issue_refund`` needs no approval: it may not share the name."""
    agent = terse_agent()
    tools = [
        replace(t, approval=None, side_effect=False, preview=None)
        if t.name == "issue_refund"
        else t
        for t in agent.tools
    ]
    return replace(agent, name="demo-unguarded", tools=Tools(*tools))


def tripwire_agent() -> Agent:
    """The demo agent (same name, prompt and tool specs) whose tools must never run."""
    settings = Settings.from_env()
    agent = demo_agent(provider_url=settings.demo_provider_url, approvers=settings.approvers)
    return replace(agent, tools=Tools(*(_tripwire(t) for t in agent.tools)))


def _tripwire(tool: Tool) -> Tool:
    def tripped(**arguments: Any) -> Any:
        with Path(os.environ[TRIPWIRE_ENV]).open("a", encoding="utf-8") as log:
            log.write(f"{tool.name} {arguments}\n")
        raise AssertionError(f"tool {tool.name} was executed")

    return replace(tool, fn=tripped)
