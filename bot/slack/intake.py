"""Acknowledge ``/agent <task>`` first, start its run after, and lose nothing in between.

The request's replay-guard record, written before anything else, carries the run to start
(its id, derived from the request's signature, its workflow and input). The listener then
acknowledges with that id and starts the run; the record is marked done. If the process dies
after the ack, any process's ``IntakeSweep`` finds the record unfinished and starts the run
(once: the id is fixed, and a run that exists is not started again). The same sweep forgets
the signatures that can no longer be replayed.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from agent_runtime import (
    Clock,
    RunExists,
    RunId,
    RunNotFound,
    Runtime,
    SignoffError,
    StoreUnavailable,
)

logger = logging.getLogger(__name__)

INTAKE_GRACE = timedelta(seconds=5)
"""How long a recorded run may wait for its listener before the sweep starts it instead.

The listener starts it within milliseconds of the ack, a second later behind a burst (see
``bot.slack.ack_gate``); a sweep that starts a run its listener is still starting costs
nothing (the second to try finds the run), so the grace only keeps sweeps from racing
every listener, and a run whose listener died starts 5 to 7 s after its ack."""
CONTEXT_KEY = "signoff_intake"
"""Where the replay middleware leaves the recorded ``Intake`` for the listener."""


class IntakeRecords(Protocol):
    """The replay guard's records, seen as work to finish."""

    def finish(self, signature: str) -> None:
        """Mark the work recorded with ``signature`` done."""
        ...

    def unfinished(self, seen_before: datetime, limit: int = 100) -> list[tuple[str, Any]]:
        """Return (signature, work) of unfinished records seen before ``seen_before``."""
        ...

    def expire(self, now: datetime) -> int:
        """Forget signatures that can no longer be replayed."""
        ...


@dataclass(frozen=True, slots=True)
class Intake:
    """A run promised in an acknowledgement: its id, workflow and input."""

    signature: str
    run_id: RunId
    workflow: str
    input: Any

    def to_json(self) -> dict[str, Any]:
        """The record stored with the request's signature."""
        return {"run_id": self.run_id, "workflow": self.workflow, "input": self.input}

    @classmethod
    def from_json(cls, signature: str, work: Any) -> Intake:
        """Read a stored record back."""
        return cls(signature, RunId(str(work["run_id"])), str(work["workflow"]), work["input"])


def run_id_for(signature: str) -> RunId:
    """The id of the run a signed request starts: the same in every process, every time."""
    return RunId(hashlib.sha256(signature.encode()).hexdigest()[:32])


def carry_out(runtime: Runtime, records: IntakeRecords, intake: Intake) -> bool:
    """Start the promised run unless it exists; mark the record done. True if started here.

    The run may be started elsewhere at the same time (the listener's process and the sweeps
    of others): whichever creates it first started it, and the others find it exists.
    A refusal that no retry cures (``SignoffError`` other than ``StoreUnavailable``: the
    workflow is gone, the input no longer valid) also marks the record done, and is raised.
    """
    try:
        runtime.get(intake.run_id)
        started = False
    except RunNotFound:
        started = _start(runtime, records, intake)
    records.finish(intake.signature)
    return started


def _start(runtime: Runtime, records: IntakeRecords, intake: Intake) -> bool:
    """Create the promised run; False if another process created it first."""
    try:
        runtime.start(intake.workflow, intake.input, run_id=intake.run_id)
    except RunExists:
        return False
    except StoreUnavailable:
        raise
    except SignoffError:
        records.finish(intake.signature)
        raise
    return True


class IntakeSweep:
    """The scheduler's job: start promised runs whose listener died; forget old signatures."""

    def __init__(
        self,
        runtime: Runtime,
        records: IntakeRecords,
        clock: Clock,
        grace: timedelta = INTAKE_GRACE,
    ) -> None:
        self.runtime = runtime
        self.records = records
        self.clock = clock
        self.grace = grace

    def sweep_once(self) -> int:
        """One round; return how many runs it started."""
        now = self.clock.now()
        started = sum(
            self._recover(Intake.from_json(signature, work))
            for signature, work in self.records.unfinished(now - self.grace)
        )
        self.records.expire(now)
        return started

    def _recover(self, intake: Intake) -> bool:
        try:
            started = carry_out(self.runtime, self.records, intake)
        except Exception:
            logger.exception(
                "acknowledged run not started", extra={"action": "intake", "run_id": intake.run_id}
            )
            return False
        if started:
            logger.warning(
                "acknowledged run started by the sweep",
                extra={"action": "intake", "run_id": intake.run_id},
            )
        return started


__all__ = ["CONTEXT_KEY", "INTAKE_GRACE", "Intake", "IntakeSweep", "carry_out", "run_id_for"]
