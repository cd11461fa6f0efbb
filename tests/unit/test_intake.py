"""Starting a run promised in an ack: once, whichever process gets there first."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agent_runtime import Run, RunId, RunNotFound, Runtime, SystemClock, Workflows
from agent_runtime.testing import InMemoryStore
from bot.slack.intake import Intake, IntakeSweep, carry_out, run_id_for

SIGNATURE = "v0=promised"


class Records:
    """The replay guard's intake records, by signature (``None`` once finished)."""

    def __init__(self, intake: Intake) -> None:
        self.work: dict[str, Any] = {intake.signature: intake.to_json()}

    def finish(self, signature: str) -> None:
        """Mark the record done."""
        self.work[signature] = None

    def unfinished(self, seen_before: datetime, limit: int = 100) -> list[tuple[str, Any]]:
        """Every record not done (all are old enough here)."""
        return [(s, w) for s, w in self.work.items() if w is not None][:limit]

    def expire(self, now: datetime) -> int:
        """Nothing expires here."""
        return 0


class CreatedMeanwhile(InMemoryStore):
    """A store in which another process creates a run just after this one read it missing."""

    def get_run(self, run_id: RunId) -> Run:
        """Read the run; if it is missing, the other process creates it right after."""
        try:
            return super().get_run(run_id)
        except RunNotFound:
            self.create_run(run_id, "one", "created elsewhere", SystemClock().now())
            raise


def promised() -> tuple[Runtime, Records, Intake]:
    """A runtime over ``CreatedMeanwhile``, and a promise recorded for one of its runs."""
    workflows = Workflows()
    workflows.add("one", lambda ctx, _: ctx.step(lambda: "done", name="only"))
    intake = Intake(SIGNATURE, run_id_for(SIGNATURE), "one", "promised")
    return Runtime(CreatedMeanwhile(), workflows), Records(intake), intake


def test_a_run_created_elsewhere_meanwhile_is_found_not_started_twice() -> None:
    """If another process creates the promised run between this one's read and its create,
    ``carry_out`` says it did not start it, marks the record done and keeps that run."""
    runtime, records, intake = promised()
    assert carry_out(runtime, records, intake) is False
    assert records.work == {SIGNATURE: None}
    assert runtime.get(intake.run_id).input == "created elsewhere"


def test_the_sweep_losing_that_race_counts_nothing_and_finishes_the_record() -> None:
    """The sweep that loses the race to create a promised run starts nothing and leaves no
    record to retry."""
    runtime, records, intake = promised()
    assert IntakeSweep(runtime, records, SystemClock()).sweep_once() == 0
    assert records.work == {SIGNATURE: None}
    assert runtime.get(intake.run_id).input == "created elsewhere"
