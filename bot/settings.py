"""Settings from the environment. The only module that reads ``os.environ``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from store.engine import DEFAULT_URL


class SettingsError(ValueError):
    """An environment variable holds a value Signoff cannot use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything configurable from the environment."""

    database_url: str = DEFAULT_URL
    workflow_modules: tuple[str, ...] = ()
    lease_ttl: timedelta = timedelta(seconds=30)
    poll_interval: timedelta = timedelta(seconds=1)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read ``SIGNOFF_*`` variables (from ``os.environ`` unless given)."""
        env = os.environ if environ is None else environ
        return cls(
            database_url=env.get("SIGNOFF_DATABASE_URL") or DEFAULT_URL,
            workflow_modules=_split(env.get("SIGNOFF_WORKFLOWS", "")),
            lease_ttl=_seconds(env, "SIGNOFF_LEASE_TTL_SECONDS", 30.0),
            poll_interval=_seconds(env, "SIGNOFF_POLL_INTERVAL_SECONDS", 1.0),
        )


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _seconds(env: Mapping[str, str], name: str, default: float) -> timedelta:
    raw = env.get(name)
    if not raw:
        return timedelta(seconds=default)
    try:
        seconds = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number of seconds, not {raw!r}") from None
    if seconds <= 0:
        raise SettingsError(f"{name} must be positive, not {raw!r}")
    return timedelta(seconds=seconds)
