"""The approvals one model turn asked for together (a batch), found from the journal.

The agent loop requests every gated call of a turn after the model step that proposed them,
then journals the turn's ``tools.as_decided`` mark: the turn's approvals are the run's
approvals asked between that model step and the mark.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_runtime.approvals import Approval, ApprovalStatus
from agent_runtime.model_input import is_model_step
from agent_runtime.records import StepRecord
from agent_runtime.store import ApprovalStore

BATCH_LIMIT = 20
"""The most calls one batch decides together (its buttons carry every call's hash)."""
SCANNED = 1000
"""The most approvals of one run read to find a batch."""


def turn_approvals(
    store: ApprovalStore, run_id: str, journal: Sequence[StepRecord], before: int
) -> list[Approval]:
    """Return the approvals asked after the last model call before step ``before``, in order."""
    models = [s.position for s in journal[:before] if is_model_step(s)]
    after = models[-1] if models else -1
    found = store.list_approvals(run_id=run_id, limit=SCANNED)
    return sorted((a for a in found if after < a.position < before), key=lambda a: a.position)


def pending_batch(
    store: ApprovalStore, run_id: str, journal: Sequence[StepRecord], before: int
) -> list[Approval]:
    """Return the turn's approvals still waiting for people (at most ``BATCH_LIMIT``)."""
    turn = turn_approvals(store, run_id, journal, before)
    return [a for a in turn if a.status == ApprovalStatus.PENDING][:BATCH_LIMIT]
