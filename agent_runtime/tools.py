"""Tools: typed Python functions the model may call, with their schema and safety options."""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, overload

from agent_runtime.models.base import ToolSpec
from agent_runtime.policy import ApprovalPolicy
from agent_runtime.previews import PreviewFn
from agent_runtime.retry import NO_RETRY, RetryPolicy
from agent_runtime.schema import RUNTIME_PARAMETERS, describe

if TYPE_CHECKING:
    import jsonschema

Verifier = Callable[[str], Any]
"""Given an idempotency key, return the effect's result if it happened, or None if not."""


class UnknownOutcome(enum.StrEnum):
    """What to do with a side effect that started but was never recorded as finished."""

    RETRY = "retry"
    """Run it again with the same idempotency key: the provider de-duplicates."""
    VERIFY = "verify"
    """Ask the tool's ``verify(key)`` whether it happened."""
    ASK = "ask"
    """Ask a person whether it happened (the default: safe for any provider)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A callable the model may use. Side-effecting tools are the ones that need care."""

    name: str
    description: str
    fn: Callable[..., Any]
    parameters: dict[str, Any]
    side_effect: bool = False
    approval: ApprovalPolicy | None = None
    retry: RetryPolicy = NO_RETRY
    timeout: timedelta | None = None
    on_unknown_outcome: UnknownOutcome = UnknownOutcome.ASK
    verify: Verifier | None = None
    preview: PreviewFn | None = None
    """What a call would do, shown first on its card and checked again before it runs."""
    takes_key: bool = field(default=False)
    _validator: jsonschema.Draft202012Validator | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.approval is not None and not self.side_effect:
            raise ValueError(f"tool {self.name}: only side-effecting tools take an approval")
        if self.preview is not None and self.approval is None:
            raise ValueError(f"tool {self.name}: only tools that need an approval take a preview")
        if self.on_unknown_outcome == UnknownOutcome.VERIFY and self.verify is None:
            raise ValueError(f"tool {self.name}: on_unknown_outcome=VERIFY needs verify=")
        if self.side_effect and self.timeout is not None:
            raise ValueError(
                f"tool {self.name}: a side-effecting tool cannot have a timeout "
                "(a timed-out call keeps running, so a retry would repeat it)"
            )

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def validation_errors(self, arguments: Any) -> list[str]:
        """Return what is wrong with model-proposed ``arguments`` (empty when they are valid)."""
        return schema_errors(self._schema_validator(), arguments)

    def check_schema(self) -> None:
        """Raise ``jsonschema.SchemaError`` if ``parameters`` is not a valid JSON Schema (a
        long-running process checks every tool at start: ``bot.app.assembly.check_tools``)."""
        self._schema_validator()

    def _schema_validator(self) -> jsonschema.Draft202012Validator:
        """The validator of ``parameters``, made (and the schema checked) on first use: JSON
        Schema is slow to import, and a process that only loads the agents (``signoff runs``)
        validates nothing."""
        validator = self._validator
        if validator is None:
            validator = schema_validator(self.parameters)
            object.__setattr__(self, "_validator", validator)
        return validator

    def call(self, arguments: dict[str, Any], idempotency_key: str) -> Any:
        """Run the tool with validated ``arguments``, handing it the key if it takes one."""
        extra = {"idempotency_key": idempotency_key} if self.takes_key else {}
        return self.fn(**arguments, **extra)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    side_effect: bool = False,
    approval: ApprovalPolicy | None = None,
    retry: RetryPolicy = NO_RETRY,
    timeout: timedelta | None = None,
    on_unknown_outcome: UnknownOutcome | None = None,
    verify: Verifier | None = None,
    preview: PreviewFn | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    side_effect: bool = False,
    approval: ApprovalPolicy | None = None,
    retry: RetryPolicy = NO_RETRY,
    timeout: timedelta | None = None,
    on_unknown_outcome: UnknownOutcome | None = None,
    verify: Verifier | None = None,
    preview: PreviewFn | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a typed function; its schema comes from the hints and the docstring.

    A parameter named ``idempotency_key`` is not shown to the model: the runtime passes the
    call's key, stable across retries, resumes and instances. ``timeout`` is for tools
    without side effects: a timed-out call cannot be stopped and keeps running in its
    thread while the retry starts, so a side-effecting tool with a timeout is refused.
    ``preview`` (tools that need an approval only) says what a call would do; see
    ``agent_runtime.previews``.
    """

    def make(function: Callable[..., Any]) -> Tool:
        if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
            raise TypeError(
                f"tool {name or function.__name__}: a tool is a plain function (async def "
                "tools are not run: call your coroutine with asyncio.run inside the tool)"
            )
        description, parameters = describe(function)
        outcome = on_unknown_outcome or (UnknownOutcome.VERIFY if verify else UnknownOutcome.ASK)
        return Tool(
            name=name or function.__name__,
            description=description,
            fn=function,
            parameters=parameters,
            side_effect=side_effect,
            approval=approval,
            retry=retry,
            timeout=timeout,
            on_unknown_outcome=outcome,
            verify=verify,
            preview=preview,
            takes_key=_takes_key(function),
        )

    return make if fn is None else make(fn)


class Tools:
    """The tools an agent may use, by name."""

    def __init__(self, *tools: Tool) -> None:
        self._by_name: dict[str, Tool] = {}
        for item in tools:
            self.add(item)

    def add(self, item: Tool) -> None:
        """Add a tool; names are unique."""
        if not isinstance(item, Tool):
            name = getattr(item, "__name__", None)
            hint = f": make {name} one with @tool" if callable(item) and name else ""
            raise TypeError(f"{item!r} is not a tool{hint}")
        if item.name in self._by_name:
            raise ValueError(f"tool {item.name!r} is already registered")
        self._by_name[item.name] = item

    def get(self, name: str) -> Tool | None:
        """Return the tool called ``name``, if any."""
        return self._by_name.get(name)

    def specs(self) -> list[ToolSpec]:
        """Return every tool as the model sees it, in name order."""
        return [self._by_name[n].spec for n in sorted(self._by_name)]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._by_name[n] for n in sorted(self._by_name))

    def __len__(self) -> int:
        return len(self._by_name)


def schema_validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator of ``schema`` (``jsonschema.SchemaError`` if it is no valid JSON Schema);
    JSON Schema is imported here, when first needed."""
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(validator: jsonschema.Draft202012Validator, arguments: Any) -> list[str]:
    """What is wrong with ``arguments`` by ``validator``, one line each, in a stable order."""
    return [_explain(e) for e in sorted(validator.iter_errors(arguments), key=str)]


def _takes_key(function: Callable[..., Any]) -> bool:
    return any(p in RUNTIME_PARAMETERS for p in inspect.signature(function).parameters)


def _explain(error: jsonschema.ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where}: {error.message}"
