"""The composition root: builds the store, the workflow registry and the runtime."""

from __future__ import annotations

import importlib

from agent_runtime import Runtime, WorkerOptions, Workflows
from agent_runtime.demo import demo_workflows
from bot.settings import Settings, SettingsError
from store import open_store


def load_workflows(modules: tuple[str, ...]) -> Workflows:
    """Return the built-in workflows plus each ``module:attribute`` registry named."""
    registry = demo_workflows()
    for spec in modules:
        registry.include(_import_registry(spec))
    return registry


def build_runtime(settings: Settings, *, migrate: bool = True) -> Runtime:
    """Open the configured database and return a runtime over it."""
    return Runtime(open_store(settings.database_url, migrate=migrate),
                   load_workflows(settings.workflow_modules))


def worker_options(settings: Settings, *, concurrency: int) -> WorkerOptions:
    """Return worker options from the settings."""
    return WorkerOptions(concurrency=concurrency, lease_ttl=settings.lease_ttl,
                         poll_interval=settings.poll_interval)


def _import_registry(spec: str) -> Workflows:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SettingsError(f"SIGNOFF_WORKFLOWS: cannot import {module_name!r}: {exc}") from exc
    registry = getattr(module, attribute or "workflows", None)
    if not isinstance(registry, Workflows):
        raise SettingsError(
            f"SIGNOFF_WORKFLOWS: {spec!r} must name a Workflows registry (module:attribute)"
        )
    return registry
