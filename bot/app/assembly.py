"""The parts of a deployment that settings name: the agents (``SIGNOFF_AGENT``), the
workflows (``SIGNOFF_WORKFLOWS``), and the runtime and approvals wired to them with the
notifiers of Slack and of the approvals API (``deploy``).

``bot.app.wiring.Services`` imports this module when a command first uses the runtime, the
approvals or the agents: a command that only reads the store loads none of it.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

import agent_runtime
import bot
from agent_runtime import Agent, Agents, SystemClock, Workflows
from agent_runtime.built_once import built_once
from agent_runtime.deployment import Deployment
from agent_runtime.observers import StepObserver
from bot.api.tools import WORKFLOW as API_WORKFLOW
from bot.api.tools import ApiTools
from bot.api.webhook_notices import WebhookNotifier
from bot.app.settings import DEMO_AGENT, DEMO_WORKFLOWS, Settings, SettingsError
from bot.mcp import parking
from bot.slack.notifier import SlackNotifier
from store import Stores

if TYPE_CHECKING:
    from agent_runtime.agent_loop import ModelResolver
    from agent_runtime.grant_service import Grants


class Deployed:
    """The runtime and approvals wired to the configured agents, and the grants over them
    (made when first used: a decision needs none)."""

    def __init__(
        self, deployment: Deployment, slack: SlackNotifier, day_granters: Collection[str]
    ) -> None:
        self.deployment = deployment
        self._slack = slack
        self._day_granters = day_granters

    @built_once
    def grants(self) -> Grants:
        """The grants over the approvals, announced in Slack."""
        from agent_runtime.grant_service import Grants

        return Grants(
            self.deployment.approvals,
            self.deployment.clock,
            day_granters=self._day_granters,
            notifier=self._slack,
        )


def deploy(
    settings: Settings, stores: Stores, models: ModelResolver, observer: StepObserver | None
) -> Deployed:
    """Wire the runtime, the approvals and the grants over ``stores`` to the agents and
    workflows the settings name, their model specs built by ``models``; ``observer`` hears
    of each entry committed and each run ended."""
    slack = SlackNotifier(stores.runs)
    deployment = Deployment(
        stores.runs,
        stores.approvals,
        load_agents(settings),
        clock=SystemClock(),
        workflows=load_workflows(settings),
        models=models,
        notifier=WebhookNotifier(slack, stores.api),
        observer=observer,
        tools=ApiTools(),
        rules=settings.rules,
    )
    return Deployed(deployment, slack, settings.grant_approvers)


def load_agents(settings: Settings) -> Agents:
    """Return the agent ``SIGNOFF_AGENT`` names (the default), plus the demo agent with
    ``SIGNOFF_DEMO=1``; raise SettingsError for an agent whose gated tools nobody may approve.
    """
    chosen = [_agent(settings.agent)] if settings.agent is not None else []
    demo: Agent | None = None
    if settings.demo:
        made = _call(DEMO_AGENT, settings)
        assert isinstance(made, Agent)
        if all(agent.name != made.name for agent in chosen):
            chosen.append(demo := made)
    for agent in chosen:
        _require_approvers(agent, from_settings=agent is demo)
    return Agents(*chosen)


def check_tools(agents: Agents) -> None:
    """Raise SettingsError naming every tool whose parameters are not a valid JSON Schema
    (checked when first used otherwise, which a one-shot command may never do)."""
    from jsonschema import SchemaError

    bad = []
    for agent in agents:
        for tool in agent.tools:
            try:
                tool.check_schema()
            except SchemaError as exc:
                bad.append(f"{agent.name}.{tool.name}: {exc.message}")
    if bad:
        raise SettingsError(f"tool parameters that are not a JSON Schema: {'; '.join(bad)}")


def load_workflows(settings: Settings) -> Workflows:
    """Return the built-in workflows, the demo ones with ``SIGNOFF_DEMO=1``, and each
    ``module:attribute`` registry ``SIGNOFF_WORKFLOWS`` names."""
    registry = Workflows()
    parking.register(registry)
    registry.add(API_WORKFLOW, parking.park)
    if settings.demo:
        demo = _call(DEMO_WORKFLOWS)
        assert isinstance(demo, Workflows)
        registry.include(demo)
    for spec in settings.workflow_modules:
        found = _import("SIGNOFF_WORKFLOWS", spec, (Workflows,))
        assert isinstance(found, Workflows)
        registry.include(found)
    return registry


def _agent(spec: str) -> Agent:
    found = _import("SIGNOFF_AGENT", spec, (Agent,))
    assert isinstance(found, Agent)
    return found


def _require_approvers(agent: Agent, *, from_settings: bool) -> None:
    """Refuse an agent with a gated tool that fewer people may approve than it requires,
    naming the groups its policies name that the agent's ``approver_groups`` lack. The
    environment's approvers are the demo agent's (``from_settings``), not another's."""
    gaps = []
    for tool in agent.tools:
        if tool.approval is None:
            continue
        found = tool.approval.snapshot(agent.approver_groups).approvers
        if len(found) < tool.approval.required:
            unknown = [g for g in tool.approval.groups if g not in agent.approver_groups]
            missing = f" (no group {', '.join(map(repr, unknown))})" if unknown else ""
            gaps.append(f"{tool.name} needs {tool.approval.required}, has {len(found)}{missing}")
    if not gaps:
        return
    if from_settings:
        fix = "set SIGNOFF_APPROVERS / SIGNOFF_APPROVER_GROUPS"
    else:
        known = ", ".join(map(repr, agent.approver_groups)) or "none"
        fix = (
            "name them in the tools' approval policies, or the groups' members in the "
            f"agent's approver_groups (its groups: {known})"
        )
    raise SettingsError(f"agent {agent.name!r} has too few approvers ({'; '.join(gaps)}): {fix}")


def _call(spec: str, *args: object) -> object:
    """Return what calling the function ``module:attribute`` names gives."""
    module_name, _, attribute = spec.partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    return factory(*args)


def _import_from_here() -> None:
    """Let ``module:attribute`` names a user gives resolve from the current directory, as
    ``python -m`` and other servers' app loaders do."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)


def _import(variable: str, spec: str, kinds: tuple[type, ...]) -> object:
    module_name, _, attribute = spec.partition(":")
    names = " or ".join(k.__name__ for k in kinds)
    if not module_name or not attribute:
        raise SettingsError(
            f"{variable}: {spec!r} must be module:attribute, the attribute "
            f"naming a {names} (as in 'mypkg.agents:support')"
        )
    _import_from_here()
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingsError(
            f"{variable}: cannot import {module_name!r} (from the current "
            f"directory, PYTHONPATH or the installed packages): {exc}"
        ) from exc
    except Exception as exc:  # the user's module is broken: say where, in one line
        raise SettingsError(f"{variable}: importing {module_name!r} failed: {_where(exc)}") from exc
    found = getattr(module, attribute, None)
    if found is None:
        raise SettingsError(f"{variable}: module {module_name!r} has no attribute {attribute!r}")
    if callable(found) and not isinstance(found, kinds):
        try:
            found = found()
        except Exception as exc:
            raise SettingsError(f"{variable}: calling {spec!r} failed: {_where(exc)}") from exc
    if not isinstance(found, kinds):
        raise SettingsError(f"{variable}: {spec!r} must name a {names} (module:attribute)")
    return found


def _where(exc: Exception) -> str:
    """``exc`` in one line, with the file and line of the user's code that raised it (the
    innermost frame outside Signoff's own packages and the import machinery)."""
    ours = tuple(
        str(Path(package.__file__ or "").parent) for package in (agent_runtime, bot, importlib)
    )
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith((*ours, "<"))
    ]
    place = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{place}"
