"""Workflows: deterministic functions registered by name."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from agent_runtime.exceptions import InvalidInput, WorkflowNotFound

if TYPE_CHECKING:
    from agent_runtime.context import RunContext

WorkflowFn = Callable[["RunContext", Any], Any]
"""A workflow: called with the run context and the run's JSON input; returns JSON output."""

Validator = Callable[[Any], object]
"""Checks a run's input before the run is created; raises ValueError with a clear message."""

F = TypeVar("F", bound=WorkflowFn)


class Workflows:
    """A registry of workflows by name. Build one per application; no global state."""

    def __init__(self) -> None:
        self._by_name: dict[str, WorkflowFn] = {}
        self._validators: dict[str, Validator] = {}

    def register(self, name: str, *, validate: Validator | None = None) -> Callable[[F], F]:
        """Decorate a function to register it as the workflow ``name``."""

        def decorator(fn: F) -> F:
            self.add(name, fn, validate=validate)
            return fn

        return decorator

    def add(self, name: str, fn: WorkflowFn, *, validate: Validator | None = None) -> None:
        """Register ``fn`` as the workflow ``name``; a name may be taken once."""
        if not name or name.strip() != name:
            raise ValueError(f"invalid workflow name {name!r}")
        if name in self._by_name and self._by_name[name] is not fn:
            raise ValueError(f"workflow {name!r} is already registered")
        self._by_name[name] = fn
        if validate is not None:
            self._validators[name] = validate

    def include(self, other: Workflows) -> None:
        """Register every workflow of ``other`` here too."""
        for name, fn in other._by_name.items():
            self.add(name, fn, validate=other._validators.get(name))

    def validate_input(self, name: str, input: Any) -> None:
        """Raise ``InvalidInput`` if the workflow's validator rejects ``input``."""
        self.get(name)
        validate = self._validators.get(name)
        if validate is None:
            return
        try:
            validate(input)
        except (ValueError, TypeError) as exc:
            raise InvalidInput(name, str(exc)) from exc

    def get(self, name: str) -> WorkflowFn:
        """Return the workflow ``name`` or raise ``WorkflowNotFound``."""
        try:
            return self._by_name[name]
        except KeyError:
            raise WorkflowNotFound(name, sorted(self._by_name)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._by_name))
