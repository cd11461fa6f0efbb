"""Ending a run on a person's word: its pending approvals are closed with it."""

from __future__ import annotations

from agent_runtime.approval_service import Approvals
from agent_runtime.approvals import Actor
from agent_runtime.ids import RunId
from agent_runtime.records import Run
from agent_runtime.runtime import Runtime


def cancel_run(runtime: Runtime, approvals: Approvals, run_id: RunId, actor: Actor) -> Run:
    """Cancel the run and close its pending approvals, so no card can still be approved."""
    run = runtime.cancel(run_id)
    approvals.close_run(run_id, actor, f"the run was cancelled by {actor.label}")
    return run
