"""An ApprovalStore in process memory, over an ``InMemoryStore`` (for tests and examples)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from agent_runtime.approvals import Actor, Approval, ApprovalStatus
from agent_runtime.audit import AUDIT_SHARDS, AuditDraft, AuditEntry, chain, genesis, shard_of
from agent_runtime.audit_keys import AuditKeys
from agent_runtime.exceptions import ApprovalNotFound, ApprovalNotPending, GrantNotFound
from agent_runtime.grants import Grant
from agent_runtime.ids import RunId
from agent_runtime.memory_store import InMemoryStore
from agent_runtime.notices import Notice
from agent_runtime.records import Event, Run
from agent_runtime.store import Closing, Granting, Judge, Ruling, Save, ruled_since

T = TypeVar("T")


class InMemoryApprovalStore:
    """An ApprovalStore in process memory, waking runs of an ``InMemoryStore``.

    With ``audit_keys``, every audit entry is signed with the first of them.
    """

    def __init__(self, runs: InMemoryStore, audit_keys: AuditKeys | None = None) -> None:
        self._runs = runs
        self._keys = audit_keys
        self._approvals: dict[str, Approval] = {}
        self._chains: dict[int, list[AuditEntry]] = {s: [] for s in range(AUDIT_SHARDS)}
        self._grants: dict[str, Grant] = {}

    def _insert_once(
        self,
        table: dict[str, T],
        key: str,
        item: T,
        audit: AuditDraft,
        notices: Sequence[Notice],
    ) -> T:
        """Store ``item`` under ``key`` with its audit entry and notices, unless ``key`` is
        taken: then return what is stored there (an idempotent create)."""
        with self._runs._lock:
            if key in table:
                return table[key]
            table[key] = item
            self._append(audit)
            self._runs.outbox.enqueue(notices, audit.at)
            return item

    def create_approval(
        self, approval: Approval, audit: AuditDraft, notices: Sequence[Notice] = ()
    ) -> Approval:
        """Store a pending approval unless its id exists."""
        return self._insert_once(self._approvals, approval.id, approval, audit, notices)

    def get_approval(self, approval_id: str) -> Approval:
        """Return the approval or raise ApprovalNotFound."""
        with self._runs._lock:
            try:
                return self._approvals[approval_id]
            except KeyError:
                raise ApprovalNotFound(approval_id) from None

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
        """Return approvals, newest first (or oldest first)."""
        with self._runs._lock:
            start = None if after is None else _order(self.get_approval(after))
            found = [
                a
                for a in self._approvals.values()
                if (run_id is None or a.run_id == run_id)
                and _matches(a, status, decidable_by, workspace)
                and (start is None or (_order(a) > start if oldest_first else _order(a) < start))
            ]
        return sorted(found, key=_order, reverse=not oldest_first)[:limit]

    def count_approvals(
        self,
        *,
        status: ApprovalStatus | None = None,
        decidable_by: str | Sequence[str] | None = None,
        workspace: str | None = None,
    ) -> int:
        """Return how many approvals match."""
        with self._runs._lock:
            return sum(
                _matches(a, status, decidable_by, workspace) for a in self._approvals.values()
            )

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
        """Compare-and-set on the version (and the deadline when deciding)."""
        with self._runs._lock:
            stored = self._approvals.get(approval.id)
            if stored is None or stored.version != approval.version:
                return False
            if decided_before is not None and stored.deadline <= decided_before:
                return False
            self._approvals[approval.id] = dataclasses.replace(
                approval, version=approval.version + 1
            )
            self._append(audit)
            self._runs.outbox.enqueue(notices, audit.at)
            if wake is not None:
                self._wake(RunId(approval.run_id), wake)
            if grant is not None and grant[0].id not in self._grants:
                self._grants[grant[0].id] = grant[0]
                self._append(grant[1])
                self._runs.outbox.enqueue(grant[2], grant[1].at)
            return True

    def decide_approval(self, approval_id: str, judge: Judge) -> tuple[Approval, Save | None]:
        """Judge the approval as stored and save what ``judge`` returns, under the lock."""
        with self._runs._lock:
            current = self.get_approval(approval_id)
            save = judge(current)
            if save is not None:
                saved = self.save_approval(
                    save.approval,
                    audit=save.audit,
                    decided_before=save.decided_before,
                    wake=save.wake,
                    notices=save.notices,
                )
                if not saved:  # judged on a copy of what is stored: the set cannot fail
                    raise RuntimeError(f"approval {approval_id} changed under its lock")
            return current, save

    def consume_approval(self, approval_id: str, position: int) -> bool:
        """Mark the approval used by the execution at ``position``."""
        with self._runs._lock:
            stored = self.get_approval(approval_id)
            if stored.consumed_by not in (None, position):
                return False
            self._approvals[approval_id] = dataclasses.replace(stored, consumed_by=position)
            return True

    def append_audit(self, audit: AuditDraft) -> AuditEntry:
        """Append an attempt to the audit log."""
        with self._runs._lock:
            return self._append(audit)

    def audit_log(self) -> tuple[list[AuditEntry], dict[int, tuple[int, str]]]:
        """Return the chains' entries, by shard, and their heads."""
        with self._runs._lock:
            entries = [entry for chain in self._chains.values() for entry in chain]
            return entries, {shard: self._head(shard) for shard in self._chains}

    def newest_audit_entries(self) -> list[AuditEntry]:
        """Return the newest entry of every chain that has one, by shard."""
        with self._runs._lock:
            return [chain[-1] for chain in self._chains.values() if chain]

    def cancel_run(
        self,
        run_id: RunId,
        now: datetime,
        notices: Sequence[Notice],
        close: Closing,
        *,
        while_pending: str | None = None,
    ) -> Run:
        """Cancel the run and close its pending approvals under one lock (only while
        ``while_pending`` is one of them, if named)."""
        with self._runs._lock:
            found = self.list_approvals(
                run_id=run_id, status=ApprovalStatus.PENDING, limit=len(self._approvals)
            )
            if while_pending is not None and while_pending not in {a.id for a in found}:
                raise ApprovalNotPending(while_pending)
            closings = [(pending, *close(pending)) for pending in found]
            run = self._runs.cancel(run_id, now, notices)
            for pending, closed, audit, more in closings:
                self._approvals[pending.id] = dataclasses.replace(
                    closed, version=pending.version + 1
                )
                self._append(audit)
                self._runs.outbox.enqueue(more, audit.at)
            return run

    def create_ruled_approval(
        self, approval: Approval, audit: AuditDraft, notices: Sequence[Notice], ruling: Ruling
    ) -> Approval:
        """Store the approval and, if its limits allow, the ruling, under one lock."""
        with self._runs._lock:
            if approval.id in self._approvals:
                return self._approvals[approval.id]
            self._approvals[approval.id] = approval
            self._append(audit)
            for draft in ruling.shadows:
                self._append(draft)
            used = [a for a in self._approvals.values() if ruled_since(a, ruling.since, approval)]
            allowed = ruling.allowed(used) and (
                ruling.grant is None or ruling.still_granted(self._grants.get(ruling.grant))
            )
            last = ruling.decision if allowed else ruling.limited
            if last is not None:
                self._append(last)
            if not allowed or ruling.decided is None:
                self._runs.outbox.enqueue(notices, audit.at)
                return approval
            stored = dataclasses.replace(ruling.decided, version=approval.version + 1)
            self._approvals[approval.id] = stored
            self._runs.outbox.enqueue(ruling.notices, audit.at)
            if ruling.wake is not None:
                self._wake(RunId(approval.run_id), ruling.wake)
            return stored

    def create_grant(self, grant: Grant, audit: AuditDraft, notices: Sequence[Notice]) -> Grant:
        """Store a grant unless its id exists."""
        return self._insert_once(self._grants, grant.id, grant, audit, notices)

    def get_grant(self, grant_id: str) -> Grant:
        """Return the grant or raise GrantNotFound."""
        with self._runs._lock:
            try:
                return self._grants[grant_id]
            except KeyError:
                raise GrantNotFound(grant_id) from None

    def list_grants(
        self,
        *,
        active_at: datetime | None = None,
        tool: str | None = None,
        limit: int = 100,
        granted_by: Actor | None = None,
    ) -> list[Grant]:
        """Return grants, newest first."""
        with self._runs._lock:
            found = [
                g
                for g in self._grants.values()
                if (tool is None or g.tool == tool)
                and (active_at is None or g.active(active_at))
                and (granted_by is None or _same_person(g.granted_by, granted_by))
            ]
        return sorted(found, key=lambda g: (g.granted_at, g.id), reverse=True)[:limit]

    def revoke_grant(
        self, revoked: Grant, audit: AuditDraft, notices: Sequence[Notice]
    ) -> Grant | None:
        """Store the revocation unless the grant is revoked already."""
        with self._runs._lock:
            if self.get_grant(revoked.id).revoked_at is not None:
                return None
            self._grants[revoked.id] = revoked
            self._append(audit)
            self._runs.outbox.enqueue(notices, audit.at)
            return revoked

    def due_approvals(self, now: datetime, limit: int = 100) -> list[Approval]:
        """Return up to ``limit`` pending approvals past their deadline or reminder time."""
        with self._runs._lock:
            due = [a for a in self._approvals.values() if _due(a, now)]
        return sorted(due, key=lambda a: (_due(a, now), a.id))[:limit]

    def _wake(self, run_id: RunId, wake: Event) -> None:
        """Deliver ``wake`` unless the run finished or already has it."""
        if not self._runs.get_run(run_id).status.finished and (
            self._runs.get_event(run_id, wake.key) is None
        ):
            self._runs.deliver_event(run_id, wake.key, wake.data, wake.delivered_at)

    def _head(self, shard: int) -> tuple[int, str]:
        chain = self._chains[shard]
        return (chain[-1].seq, chain[-1].hash) if chain else (0, genesis(shard))

    def _append(self, audit: AuditDraft) -> AuditEntry:
        shard = shard_of(audit.run_id)
        seq, prev_hash = self._head(shard)
        entry = chain(audit, seq + 1, prev_hash, self._keys)
        self._chains[shard].append(entry)
        return entry


def _matches(
    approval: Approval,
    status: ApprovalStatus | None,
    decidable_by: str | Sequence[str] | None,
    workspace: str | None,
) -> bool:
    """Whether ``approval`` passes a list's filters (those ``Store.list_approvals`` names)."""
    entries = (decidable_by,) if isinstance(decidable_by, str) else decidable_by
    asked_in = approval.requester.workspace
    return (
        (status is None or approval.status == status)
        and (entries is None or any(e in approval.eligible for e in entries))
        and (workspace is None or asked_in in ("", workspace))
    )


def _same_person(one: Actor, other: Actor) -> bool:
    """Whether the two are the same user id of one workspace."""
    return one.user_id == other.user_id and one.workspace == other.workspace


def _order(approval: Approval) -> tuple[datetime, int, str]:
    """Where ``approval`` sorts in lists (they show the greatest first)."""
    return (approval.requested_at, approval.position, approval.id)


def _due(approval: Approval, now: datetime) -> datetime | None:
    """The approval's next due time if it is at or before ``now``."""
    due = approval.next_due_at
    return due if due is not None and due <= now else None
