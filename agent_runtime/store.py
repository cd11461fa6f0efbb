"""The storage contract the runtime depends on: domain operations, not SQL."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from agent_runtime.approvals import Actor, Approval, ApprovalStatus
from agent_runtime.audit import AuditDraft, AuditEntry
from agent_runtime.grants import Grant
from agent_runtime.ids import RunId
from agent_runtime.notices import Notice
from agent_runtime.records import (
    AttemptRecord,
    ErrorInfo,
    Event,
    Fork,
    Lease,
    Run,
    RunStatus,
    StepRecord,
    Wait,
)
from agent_runtime.rules import RULE_ACTOR_PREFIX


class Store(Protocol):
    """Durable state of runs. Every method is one transaction; writes under a lease are fenced.

    A method that takes a ``Lease`` raises ``LeaseLost`` when the run's fence no longer
    equals the lease's, and changes nothing.
    """

    def create_run(
        self,
        run_id: RunId,
        workflow: str,
        input: Any,
        now: datetime,
        notices: Sequence[Notice] = (),
        fork: Fork | None = None,
    ) -> Run:
        """Store a new pending run (and queue ``notices`` with it).

        With ``fork`` the run starts with the fork's inherited journal entries, written in
        the same transaction; ``RunNotFound`` if the source run does not exist. An id that
        is taken raises ``RunExists`` and changes nothing.
        """
        ...

    def get_run(self, run_id: RunId) -> Run:
        """Return the run or raise ``RunNotFound``."""
        ...

    def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        limit: int = 100,
        forked_from: RunId | None = None,
        input_fields: Mapping[str, str] | None = None,
        after: RunId | None = None,
    ) -> list[Run]:
        """Return the newest runs first, optionally only those with ``status``, forked from
        ``forked_from``, or whose input holds each string of ``input_fields`` at its dotted
        path (``{"requester.user_id": "U1"}``).

        A page starts after the run ``after`` (the last one of the page before, in this
        order: creation time, then id); ``RunNotFound`` if there is no such run.
        """
        ...

    def claim_runs(
        self, owner: str, *, limit: int, now: datetime, expires_at: datetime
    ) -> list[tuple[Run, Lease]]:
        """Lease up to ``limit`` runnable runs to ``owner`` until ``expires_at``.

        Runnable: pending; waiting with a due time at or before ``now``; running with an
        expired lease. Each claim increases the run's fence.
        """
        ...

    def renew_lease(self, lease: Lease, expires_at: datetime) -> bool:
        """Extend a held lease; return False when it was lost."""
        ...

    def renew_leases(self, leases: Sequence[Lease], expires_at: datetime) -> list[Lease]:
        """Extend held leases in one statement (a worker's heartbeat); return those lost."""
        ...

    def load_journal(self, run_id: RunId) -> list[StepRecord]:
        """Return the run's journal in position order."""
        ...

    def append_step(self, lease: Lease, step: StepRecord, notices: Sequence[Notice] = ()) -> None:
        """Append one journal entry (and queue ``notices`` with it).

        ``JournalConflict`` if the position is taken.
        """
        ...

    def record_attempt(self, lease: Lease, attempt: AttemptRecord) -> None:
        """Record a failed attempt of the step in flight.

        ``AttemptConflict`` if the run already has this attempt of this step.
        """
        ...

    def list_attempts(self, run_id: RunId) -> list[AttemptRecord]:
        """Return every failed attempt of the run, oldest first."""
        ...

    def suspend(self, lease: Lease, wait: Wait, now: datetime) -> RunStatus:
        """Give up the lease and wait; return PENDING instead if the awaited event is here."""
        ...

    def release(self, lease: Lease, now: datetime, due_at: datetime | None = None) -> None:
        """Give up the lease so that any worker may resume the run at once (from ``due_at``
        if given)."""
        ...

    def complete(
        self, lease: Lease, output: Any, now: datetime, notices: Sequence[Notice] = ()
    ) -> None:
        """End the run successfully with ``output`` (and queue ``notices``)."""
        ...

    def fail(
        self, lease: Lease, error: ErrorInfo, now: datetime, notices: Sequence[Notice] = ()
    ) -> None:
        """End the run as failed with ``error`` (and queue ``notices``)."""
        ...

    def cancel(self, run_id: RunId, now: datetime, notices: Sequence[Notice] = ()) -> Run:
        """Cancel an unfinished run and revoke any lease on it (and queue ``notices``);
        ``InvalidRunState`` if it is finished."""
        ...

    def resume(self, run_id: RunId, now: datetime) -> Run:
        """Make a failed run pending again, keeping its journal; ``InvalidRunState`` otherwise."""
        ...

    def deliver_event(self, run_id: RunId, key: str, data: Any, now: datetime) -> Run:
        """Store an event for the run and wake it if it waits for ``key``.

        Raises ``EventAlreadyDelivered`` for a second event with the same key and
        ``InvalidRunState`` for a finished run.
        """
        ...

    def get_event(self, run_id: RunId, key: str) -> Event | None:
        """Return the event delivered under ``key``, if any."""
        ...

    def next_due(self) -> datetime | None:
        """Return the earliest time at which some unfinished run becomes runnable."""
        ...


Granting = tuple[Grant, AuditDraft, Sequence[Notice]]
"""A grant given with a decision: the grant, its audit entry and its notices."""

Closing = Callable[[Approval], tuple[Approval, AuditDraft, Sequence[Notice]]]
"""Given a pending approval of a cancelled run: the closed approval, its audit entry, notices."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Ruling:
    """What rules make of a new approval, to be stored with it in one transaction.

    ``shadows`` are always appended. ``allowed`` is given the approvals that rules approved
    since ``since`` or in the same run, read inside that transaction, and tells whether the
    deciding rule's limits still allow it: if so, ``decided`` (when not None) replaces the
    pending approval with ``decision`` as its audit entry, ``wake``, and ``notices`` instead
    of the request's; if not, ``limited`` (when not None) is appended and the approval
    stays pending, with the request's notices.

    With ``grant`` (a grant's id), ``still_granted`` is also given the grant as stored, read
    and locked inside that transaction (None if there is none): a ruling by a grant revoked
    or expired meanwhile is not applied.
    """

    since: datetime
    shadows: Sequence[AuditDraft] = ()
    decided: Approval | None = None
    decision: AuditDraft | None = None
    notices: Sequence[Notice] = ()
    wake: Event | None = None
    limited: AuditDraft | None = None
    allowed: Callable[[Sequence[Approval]], bool] = lambda used: True
    grant: str | None = None
    still_granted: Callable[[Grant | None], bool] = lambda grant: True


def ruled_since(approval: Approval, since: datetime, new: Approval) -> bool:
    """Tell whether a rule approved ``approval`` since ``since`` or in ``new``'s run."""
    by = approval.decided_by
    return (
        approval.status == ApprovalStatus.APPROVED
        and approval.id != new.id
        and by is not None
        and by.user_id.startswith(RULE_ACTOR_PREFIX)
        and (
            approval.run_id == new.run_id
            or (approval.decided_at is not None and approval.decided_at >= since)
        )
    )


@dataclass(frozen=True, slots=True)
class Save:
    """One compare-and-set of an approval, with what its transaction writes beside it (see
    ``ApprovalStore.save_approval``)."""

    approval: Approval
    audit: AuditDraft
    decided_before: datetime | None
    wake: Event | None
    notices: Sequence[Notice]


Judge = Callable[[Approval], Save | None]
"""Given an approval as stored, what to save of it (None: nothing)."""


class ApprovalStore(Protocol):
    """Durable approvals and their audit log. Decisions are compare-and-set on ``version``."""

    def create_approval(
        self, approval: Approval, audit: AuditDraft, notices: Sequence[Notice] = ()
    ) -> Approval:
        """Store a pending approval, its audit entry and ``notices``; if its id exists, return
        the stored one and change nothing."""
        ...

    def get_approval(self, approval_id: str) -> Approval:
        """Return the approval or raise ``ApprovalNotFound``."""
        ...

    def list_approvals(
        self,
        *,
        run_id: str | None = None,
        status: ApprovalStatus | None = None,
        limit: int = 100,
        decidable_by: str | Sequence[str] | None = None,
        after: str | None = None,
        workspace: str | None = None,
        oldest_first: bool = False,
    ) -> list[Approval]:
        """Return approvals, newest first (``oldest_first``: oldest first), optionally only
        those of ``run_id``, with ``status``, whose eligible deciders include ``decidable_by``
        (any of them, if several), or asked in ``workspace`` (or from no workspace).

        A page starts after the approval ``after`` (the last one of the page before, in
        this order: request time, position, id); ``ApprovalNotFound`` if there is none.
        """
        ...

    def count_approvals(
        self,
        *,
        status: ApprovalStatus | None = None,
        decidable_by: str | Sequence[str] | None = None,
        workspace: str | None = None,
    ) -> int:
        """Return how many approvals ``list_approvals`` would list with these filters."""
        ...

    def save_approval(
        self,
        approval: Approval,
        *,
        audit: AuditDraft,
        decided_before: datetime | None,
        wake: Event | None,
        notices: Sequence[Notice] = (),
        grant: Granting | None = None,
    ) -> bool:
        """Write ``approval`` (and queue ``notices``) if the stored one has its version.

        The stored version becomes ``approval.version + 1``. With ``decided_before`` the write
        also requires the stored deadline to be later than it. With ``wake`` the event is
        delivered to the approval's run in the same transaction. With ``grant``, the grant is
        stored too (unless its id exists), its audit entry after the decision's, and its
        notices queued. Returns False, changing nothing, when the compare-and-set fails.
        """
        ...

    def decide_approval(self, approval_id: str, judge: Judge) -> tuple[Approval, Save | None]:
        """Call ``judge`` on the approval as stored, locked so that nothing changes it
        until what ``judge`` returns is saved (as ``save_approval`` saves it, in the same
        transaction); return the approval ``judge`` was given and the save, if any.

        ``ApprovalNotFound`` if there is no such approval; an exception ``judge`` raises
        changes nothing and is raised. ``judge`` may be called again if the transaction
        must be retried: it must not write anything itself. Concurrent calls may be
        carried out together, one after the other in one transaction.
        """
        ...

    def consume_approval(self, approval_id: str, position: int) -> bool:
        """Mark the approval used by the execution at ``position``; False if another used it."""
        ...

    def append_audit(self, audit: AuditDraft) -> AuditEntry:
        """Append an entry that records an attempt which changed nothing."""
        ...

    def audit_log(self) -> tuple[list[AuditEntry], dict[int, tuple[int, str]]]:
        """Return every audit entry, by shard then number, and each shard's recorded head
        (seq, hash), (0, its genesis hash) while its chain is empty."""
        ...

    def newest_audit_entries(self) -> list[AuditEntry]:
        """Return the newest entry of every shard's chain that has one (what an anchor
        records), by shard."""
        ...

    def due_approvals(self, now: datetime, limit: int = 100) -> list[Approval]:
        """Return up to ``limit`` pending approvals whose deadline or reminder time is at or
        before ``now``, the longest overdue first."""
        ...

    def cancel_run(
        self,
        run_id: RunId,
        now: datetime,
        notices: Sequence[Notice],
        close: Closing,
        *,
        while_pending: str | None = None,
    ) -> Run:
        """Cancel the run as ``Store.cancel`` does and, in the same transaction, store what
        ``close`` makes of each of its pending approvals (with its audit entry and notices).

        With ``while_pending`` (an approval id of the run) this is a compare-and-set: if that
        approval is not pending when the transaction reads it, change nothing and raise
        ``ApprovalNotPending``."""
        ...

    def create_ruled_approval(
        self, approval: Approval, audit: AuditDraft, notices: Sequence[Notice], ruling: Ruling
    ) -> Approval:
        """Store the approval with its audit entry and, in the same transaction, ``ruling``
        (see ``Ruling``): safe against concurrent rulings, so two processes never both use a
        rule's last allowed approval. If the id exists, change nothing and return the stored
        approval; else return the approval as stored (decided or pending)."""
        ...

    def create_grant(self, grant: Grant, audit: AuditDraft, notices: Sequence[Notice]) -> Grant:
        """Store a grant with its audit entry and ``notices``; if its id exists, return the
        stored one and change nothing."""
        ...

    def get_grant(self, grant_id: str) -> Grant:
        """Return the grant or raise ``GrantNotFound``."""
        ...

    def list_grants(
        self,
        *,
        active_at: datetime | None = None,
        tool: str | None = None,
        limit: int = 100,
        granted_by: Actor | None = None,
    ) -> list[Grant]:
        """Return grants, newest first, optionally only those of ``tool``, neither revoked
        nor expired at ``active_at``, or given by ``granted_by`` (in their workspace)."""
        ...

    def revoke_grant(
        self, revoked: Grant, audit: AuditDraft, notices: Sequence[Notice]
    ) -> Grant | None:
        """Store the revocation ``revoked`` carries, its audit entry and ``notices`` if the
        stored grant is not revoked yet; else change nothing and return None."""
        ...
