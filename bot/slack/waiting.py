"""What waits on a person: the pending approvals they may decide, asked in their workspace.

One query for ``/agent pending`` and the Home tab: the store filters by the approver lists
that name the person (their user id, or ``USER@WORKSPACE``) and by the requester's workspace,
a page at a time, so nobody's list is read whole to show a few.
"""

from __future__ import annotations

from agent_runtime import Actor, Approval, ApprovalStatus, ApprovalStore


def entries_naming(actor: Actor) -> tuple[str, ...]:
    """The approver list entries that name ``actor``: their user id, and it scoped to their
    workspace and their Grid organization."""
    scoped = (f"{actor.user_id}@{w}" for w in (actor.team_id, actor.enterprise_id) if w)
    return (actor.user_id, *sorted(scoped))


def waiting_on(
    store: ApprovalStore, actor: Actor, *, limit: int, oldest_first: bool = False
) -> list[Approval]:
    """The first ``limit`` approvals waiting on ``actor``, newest (or oldest) first."""
    return store.list_approvals(
        status=ApprovalStatus.PENDING,
        decidable_by=entries_naming(actor),
        workspace=actor.workspace or None,
        limit=limit,
        oldest_first=oldest_first,
    )


def count_waiting(store: ApprovalStore, actor: Actor) -> int:
    """How many approvals wait on ``actor`` in all."""
    return store.count_approvals(
        status=ApprovalStatus.PENDING,
        decidable_by=entries_naming(actor),
        workspace=actor.workspace or None,
    )
