"""Liveness and readiness of a process, for ``/healthz`` and ``/readyz``.

Alive: the process answers and none of its loops has been silent long enough for the
watchdog to end it. Ready: besides, the database answers, its schema is at the newest
migration this code knows (or a newer one), and every loop went round within its
interval plus the stall allowance.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from agent_runtime.exceptions import StoreUnavailable
from bot.ops.loops import Loops

OK = "ok"
STARTING = "starting"
"""A liveness result: the process is alive and still reaching its database."""


@dataclass(frozen=True, slots=True)
class Report:
    """The result of each check by name: ``ok``, ``starting`` (passing, but the process is
    not up yet), or what is wrong."""

    checks: dict[str, str]

    @property
    def ok(self) -> bool:
        """Tell whether every check passed."""
        return all(result in (OK, STARTING) for result in self.checks.values())

    @property
    def status(self) -> str:
        """Return ``ok``, ``starting`` or ``fail``."""
        if not self.ok:
            return "fail"
        return STARTING if STARTING in self.checks.values() else OK

    def body(self) -> bytes:
        """Return the JSON body: the status, the checks, and the names of the failing ones."""
        passing = (OK, STARTING)
        failing = sorted(name for name, result in self.checks.items() if result not in passing)
        return (
            json.dumps({"status": self.status, "failing": failing, "checks": self.checks}).encode()
            + b"\n"
        )


@dataclass(frozen=True, slots=True)
class Health:
    """Checks the loops of this process and, for readiness, its database."""

    loops: Loops
    schema_current: Callable[[], bool]
    stall_after: timedelta
    exit_after: timedelta

    def liveness(self) -> Report:
        """Alive unless a loop is about to be ended by the watchdog."""
        return Report(self._loop_checks(self.exit_after))

    def readiness(self) -> Report:
        """Ready when the database is reachable and current and every loop ticks."""
        return Report({**self._database(), **self._loop_checks(self.stall_after)})

    def _database(self) -> dict[str, str]:
        try:
            current = self.schema_current()
        except StoreUnavailable as exc:  # its message names the host: the log has it
            cause = type(exc.__cause__ or exc).__name__
            return {"database": f"unreachable ({cause})", "migrations": "unknown"}
        return {
            "database": OK,
            "migrations": OK if current else "behind the code (run signoff db upgrade)",
        }

    def _loop_checks(self, grace: timedelta) -> dict[str, str]:
        stalled = self.loops.stalled(grace)
        return {
            f"loop:{name}": (f"silent for {stalled[name]:.1f}s" if name in stalled else OK)
            for name in self.loops.last_ticks()
        }
