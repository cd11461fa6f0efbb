"""The approvals one model turn asked for together (a batch), found from their positions.

The agent loop requests every gated call of a turn, one journal step each and nothing in
between, then journals the turn's ``tools.as_decided`` mark: the turn's approvals are the
run's approvals at the positions just before that mark.
"""

from __future__ import annotations

from agent_runtime.approvals import Approval, ApprovalStatus
from agent_runtime.store import ApprovalStore

BATCH_LIMIT = 20
"""The most calls one batch decides together (its buttons carry every call's hash)."""
SCANNED = 1000
"""The most approvals of one run read to find a batch."""


def turn_approvals(store: ApprovalStore, run_id: str, before: int) -> list[Approval]:
    """Return the approvals requested in the journal steps just before ``before``, in order."""
    by_position = {a.position: a for a in store.list_approvals(run_id=run_id, limit=SCANNED)}
    found: list[Approval] = []
    position = before - 1
    while position in by_position:
        found.append(by_position[position])
        position -= 1
    return found[::-1]


def pending_batch(store: ApprovalStore, run_id: str, before: int) -> list[Approval]:
    """Return the turn's approvals still waiting for people (at most ``BATCH_LIMIT``)."""
    pending = [
        a for a in turn_approvals(store, run_id, before) if a.status == ApprovalStatus.PENDING
    ]
    return pending[:BATCH_LIMIT]
