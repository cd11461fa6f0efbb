"""Agents: a model, a system prompt, tools, a budget and approval policies, under a name."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from agent_runtime import definitions
from agent_runtime.approvals import Actor, listed
from agent_runtime.budget import DEFAULT_PRICES, Budget, PriceTable
from agent_runtime.exceptions import UserError
from agent_runtime.models.base import Model
from agent_runtime.models.spec import ModelSpec
from agent_runtime.policy import ApprovalPolicy
from agent_runtime.retry import RetryPolicy
from agent_runtime.tools import Tool, Tools

MAX_TASK_CHARS = 20_000


class AgentNotFound(UserError):
    """No agent is registered under the given name."""

    def __init__(self, name: str, known: list[str]) -> None:
        if known:
            message = f"unknown agent {name!r} (registered: {', '.join(known)})"
        else:
            message = "no agent is configured (name one with SIGNOFF_AGENT=module:attribute)"
        super().__init__(message)
        self.name = name


@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """An agent definition. Its runs are the workflow ``agent:<name>``."""

    name: str
    model: Model | str
    """The model, or a spec naming one (``openai:gpt-4o-mini``, ``anthropic:…``,
    ``module:attribute``) that the deployment resolves with its keys and URLs."""
    system_prompt: str
    tools: Tools
    budget: Budget = field(default_factory=Budget)
    prices: PriceTable = DEFAULT_PRICES
    approver_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    budget_approvers: tuple[str, ...] = ()
    budget_policy: ApprovalPolicy | None = None
    """Who may raise an exhausted budget, how many must agree, by when. By default one
    of ``budget_approvers`` or of the approvers of any of the agent's gated tools."""
    max_output_tokens: int = 1024
    max_turns: int = 25
    model_retry: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(max_attempts=4, initial_interval=timedelta(seconds=1))
    )

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(f"an agent's name must be a non-empty string, not {self.name!r}")
        where = f"agent {self.name}"
        if not isinstance(self.system_prompt, str):
            raise TypeError(f"{where}: system_prompt must be a string")
        if not isinstance(self.budget, Budget):
            raise TypeError(f"{where}: budget must be a Budget, not {type(self.budget).__name__}")
        kept = {
            "tools": _tools(self.tools, where),
            "approver_groups": definitions.groups(
                self.approver_groups, f"{where}: approver_groups"
            ),
            "budget_approvers": definitions.names(
                self.budget_approvers, f"{where}: budget_approvers"
            ),
        }
        for name, value in kept.items():
            object.__setattr__(self, name, value)
        definitions.count(self.max_output_tokens, f"{where}: max_output_tokens", least=1)
        definitions.count(self.max_turns, f"{where}: max_turns", least=1)
        if isinstance(self.model, str):
            object.__setattr__(self, "model", ModelSpec(self.model))
        if self.budget.cost_usd is not None and self.llm.name not in self.prices:
            raise ValueError(
                f"agent {self.name}: a cost budget needs a price for model "
                f"{self.llm.name!r} (add it to the agent's price table)"
            )

    @property
    def llm(self) -> Model:
        """The model the agent calls (a spec given as a string is a ``ModelSpec`` here)."""
        assert not isinstance(self.model, str)
        return self.model

    @property
    def workflow(self) -> str:
        """The name of the workflow that runs this agent."""
        return f"agent:{self.name}"

    def may_raise_budget(self, actor: Actor) -> bool:
        """Tell whether ``actor`` may raise or end an exhausted budget of this agent's runs."""
        policy = self.raise_policy()
        return policy is not None and listed(policy.snapshot(self.approver_groups).approvers, actor)

    def raise_policy(self) -> ApprovalPolicy | None:
        """The policy a budget raise is approved under (None when nobody may raise one)."""
        if self.budget_policy is not None:
            return self.budget_policy
        people, groups = set(self.budget_approvers), set[str]()
        for tool in self.tools:
            if tool.approval is not None:
                people.update(tool.approval.approvers)
                groups.update(tool.approval.groups)
        if not people and not groups:
            return None
        # the person who started the run may raise it if listed, as before budgets were
        # approvals; a stricter ``budget_policy`` can forbid it
        return ApprovalPolicy(
            approvers=tuple(sorted(people)), groups=tuple(sorted(groups)), allow_requester=True
        )


def _tools(value: object, where: str) -> Tools:
    """The agent's tools: ``Tools``, or any iterable of tools (a list, a tuple)."""
    if isinstance(value, Tools):
        return value
    if isinstance(value, Tool):
        return Tools(value)
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise TypeError(f"{where}: tools must be Tools(...) or a list of tools, not {value!r}")
    return Tools(*value)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentInput:
    """What an agent run is started with."""

    task: str
    requester: Actor
    budget: Budget | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    """A model to use instead of the agent's own (a model spec the deployment resolves)."""

    @property
    def channel(self) -> str:
        """The channel the run was started from: ``context.channel``, or the Slack channel
        ``context.slack.channel`` of a run started from Slack ("" if neither)."""
        return channel_of(self.context)

    def to_json(self) -> dict[str, Any]:
        """Return the run input."""
        data = {
            "task": self.task,
            "requester": self.requester.to_json(),
            "budget": None if self.budget is None else self.budget.to_json(),
            "context": dict(self.context),
        }
        return data if self.model is None else data | {"model": self.model}

    @classmethod
    def from_json(cls, data: Any) -> AgentInput:
        """Read and check a run input; ``ValueError`` says what is wrong."""
        if not isinstance(data, dict) or not isinstance(data.get("task"), str):
            raise ValueError('an agent run needs input like {"task": "...", "requester": {...}}')
        task = data["task"].strip()
        if not task:
            raise ValueError("the task is empty")
        if len(task) > MAX_TASK_CHARS:
            raise ValueError(f"the task is longer than {MAX_TASK_CHARS} characters")
        requester = data.get("requester") or {"user_id": "cli"}
        budget = data.get("budget")
        model = data.get("model")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ValueError("the model must be a non-empty model spec")
        return cls(
            task=task,
            requester=Actor.from_json(requester),
            budget=None if budget is None else Budget.from_json(budget),
            context=data.get("context") or {},
            model=model,
        )

    @classmethod
    def of(cls, data: Any) -> AgentInput | None:
        """Read a run's input if it is an agent's; None for another workflow's input (or one
        that is no agent input: it cannot have started an agent run)."""
        try:
            return cls.from_json(data)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


class Agents:
    """Agents by name; the first added is the default unless another is named."""

    def __init__(self, *agents: Agent, default: str | None = None) -> None:
        self._by_name: dict[str, Agent] = {}
        for agent in agents:
            self.add(agent)
        self._default = default

    def add(self, agent: Agent) -> None:
        """Register an agent; names are unique."""
        if agent.name in self._by_name:
            raise ValueError(f"agent {agent.name!r} is already registered")
        self._by_name[agent.name] = agent

    def get(self, name: str | None = None) -> Agent:
        """Return the agent ``name`` (or the default) or raise ``AgentNotFound``."""
        key = name or self._default or next(iter(self._by_name), "")
        try:
            return self._by_name[key]
        except KeyError:
            raise AgentNotFound(key, sorted(self._by_name)) from None

    @property
    def default_name(self) -> str | None:
        """The name of the agent ``get()`` returns when none is named, if one was chosen."""
        return self._default

    def for_workflow(self, workflow: str) -> Agent | None:
        """Return the agent whose runs are ``workflow``, if any."""
        name = workflow.removeprefix("agent:")
        return self._by_name.get(name) if workflow.startswith("agent:") else None

    def __iter__(self) -> Iterator[Agent]:
        return iter(self._by_name.values())


def channel_of(context: Any) -> str:
    """Return the channel an agent run's ``context`` names ("" if none)."""
    if not isinstance(context, Mapping):
        return ""
    slack = context.get("slack")
    found = context.get("channel") or (slack.get("channel") if isinstance(slack, Mapping) else "")
    return found if isinstance(found, str) else ""
