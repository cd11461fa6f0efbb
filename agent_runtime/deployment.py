"""The wiring of agents to stores: the tool lookup, the approvals service and the runtime."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from agent_runtime.agent import Agent, AgentInput, Agents
from agent_runtime.approval_service import Approvals
from agent_runtime.budget_ask import budget_tool
from agent_runtime.built_once import built_once
from agent_runtime.clock import Clock, SystemClock
from agent_runtime.exceptions import InvalidConfiguration
from agent_runtime.models.spec import ModelSpec
from agent_runtime.notices import Notifier
from agent_runtime.observers import StepObserver
from agent_runtime.rules import Rules
from agent_runtime.store import ApprovalStore, Store
from agent_runtime.tool_lookup import ToolLookup
from agent_runtime.workflows import WorkflowFn, Workflows

if TYPE_CHECKING:
    from agent_runtime.agent_loop import ModelResolver
    from agent_runtime.context import RunContext
    from agent_runtime.runtime import Runtime


class Deployment:
    """Agents wired to a store: one place builds the runtime, approvals and tool lookup.

    Each agent's tools are known to approvals with that agent's approver groups, which
    are also the groups its approval policies are resolved with: one source for both.
    Everything is built at once (a configuration error is raised here) but the runtime,
    made when first used, and the agent loop, imported when a run first executes: deciding
    an approval needs neither, nor their modules.
    """

    def __init__(
        self,
        store: Store,
        approval_store: ApprovalStore,
        agents: Agents | Sequence[Agent],
        *,
        clock: Clock | None = None,
        workflows: Workflows | None = None,
        models: ModelResolver | None = None,
        notifier: Notifier | None = None,
        observer: StepObserver | None = None,
        sweeps: Sequence[Callable[[], object]] = (),
        tools: ToolLookup | None = None,
        rules: Rules | None = None,
    ) -> None:
        self.clock = clock or SystemClock()
        listed = agents if isinstance(agents, Agents) else Agents(*agents)
        self.agents = resolved(listed, models)
        self.tools = tool_lookup(self.agents, tools)
        self.approvals = Approvals(approval_store, self.clock, self.tools, notifier, rules)
        self.workflows = workflows or Workflows()
        for agent in self.agents:
            self.workflows.add(
                agent.workflow,
                _agent_workflow(agent, self.approvals, models),
                validate=AgentInput.from_json,
            )
        self._store = store
        self._sweeps = tuple(sweeps)
        self._notifier = notifier
        self._observer = observer

    @built_once
    def runtime(self) -> Runtime:
        """The runtime over the store and these workflows, its sweeps led by the approvals'."""
        from agent_runtime.runtime import Runtime

        return Runtime(
            self._store,
            self.workflows,
            clock=self.clock,
            sweeps=(self.approvals.sweep, *self._sweeps),
            notifier=self._notifier,
            observer=self._observer,
            approvals=self.approvals,
        )


def _agent_workflow(agent: Agent, approvals: Approvals, models: ModelResolver | None) -> WorkflowFn:
    """The workflow that runs ``agent`` (``agent_loop.agent_workflow``'s), the agent loop
    imported when a run first executes."""

    def workflow(ctx: RunContext, data: object) -> object:
        from agent_runtime.agent_loop import agent_workflow

        return agent_workflow(agent, approvals, models)(ctx, data)

    return workflow


def resolved(agents: Agents, models: ModelResolver | None) -> Agents:
    """Return ``agents`` with each model given as a spec string built by ``models``; a spec
    that cannot be built is an ``InvalidConfiguration`` now, before any run starts."""
    if models is None:
        return agents
    built = [_with_built_model(agent, models) for agent in agents]
    return Agents(*built, default=agents.default_name)


def _with_built_model(agent: Agent, models: ModelResolver) -> Agent:
    if not isinstance(agent.model, ModelSpec):
        return agent
    try:
        return replace(agent, model=models(agent.model.spec))
    except ValueError as exc:
        raise InvalidConfiguration(f"agent {agent.name!r}: {exc}") from None


def tool_lookup(agents: Agents, lookup: ToolLookup | None = None) -> ToolLookup:
    """Return ``lookup`` (a new one by default) knowing every agent's tools, each with its
    agent's approver groups.

    Each agent's budget raises are known by the stand-in ``budget:<agent>`` (see
    ``agent_runtime.budget_ask``). Agents may share a tool name (a new prompt for the same
    tools, say) only when the tools are the same to approvals: same schema, same resolved
    policy, and both or neither with side effects; otherwise ``InvalidConfiguration``.
    """
    lookup = ToolLookup() if lookup is None else lookup
    for agent in agents:
        raising = budget_tool(agent)
        for item in [*agent.tools, *([raising] if raising is not None else [])]:
            existing = lookup.get(item.name)
            if existing is None:
                lookup.add(item, agent.approver_groups)
            elif existing is not item and (
                lookup.fingerprint(existing) != lookup.fingerprint(item, agent.approver_groups)
                or existing.side_effect != item.side_effect
            ):
                raise InvalidConfiguration(f"two agents define different tools named {item.name!r}")
    return lookup
