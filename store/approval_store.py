"""The runtime's ApprovalStore on SQLAlchemy Core: approvals and the chained audit log."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Integer,
    Select,
    and_,
    bindparam,
    false,
    func,
    or_,
    select,
    update,
)

from agent_runtime.approvals import Actor, Approval, ApprovalStatus
from agent_runtime.audit import AuditDraft, AuditEntry
from agent_runtime.audit_keys import AuditKeys
from agent_runtime.exceptions import (
    ApprovalNotFound,
    ApprovalNotPending,
    GrantNotFound,
    StoreUnavailable,
)
from agent_runtime.grants import Grant
from agent_runtime.ids import RunId
from agent_runtime.notices import Notice
from agent_runtime.records import Event, Run
from agent_runtime.store import Closing, Granting, Judge, Ruling, Save, ruled_since
from store import dialects
from store.approval_rows import approval_of, changes, row_of
from store.approval_saves import Decided, Deciding, decide_many, save_many
from store.audit_chains import Chains, newest_entries, read_log
from store.connections import reading, writing
from store.decision_pipeline import DecisionStatements, decide_pipelined
from store.driver import DriverConnections, Prepared
from store.engine import reader
from store.errors import is_conflict, translated
from store.grant_rows import insert_grant, locked_grant, mark_revoked, read_grant, select_grants
from store.group_commit import GroupCommit
from store.json_filters import array_has, in_workspace
from store.models import approvals, runs
from store.outbox import write_notices
from store.pages import after as page_after
from store.pages import newest_first
from store.pages import oldest_first as oldest_first_by
from store.row_checks import row_has
from store.run_sql import cancel_in
from store.wake import deliver

APPROVAL_ORDER = (approvals.c.requested_at, approvals.c.position, approvals.c.id)
"""The order of lists of approvals (newest first), which their indexes hold."""
APPROVAL_BY_ID = select(approvals).where(approvals.c.id == bindparam("approval_id"))
_USED_AT = bindparam("position", type_=Integer)
CONSUME = (  # an approval used by the execution at a position (again by the same: a replay)
    update(approvals)
    .where(
        approvals.c.id == bindparam("id"),
        or_(approvals.c.consumed_by.is_(None), approvals.c.consumed_by == _USED_AT),
    )
    .values(consumed_by=_USED_AT)
)
PENDING_OF_RUN = (
    select(approvals)
    .where(
        approvals.c.run_id == bindparam("run_id"),
        row_has(approvals.c.status, ApprovalStatus.PENDING.value),
    )
    .order_by(approvals.c.id)
)
"""A run's pending approvals (locked, on PostgreSQL, by a cancel that closes them)."""
SAVE_IF_VERSION = update(approvals).where(
    approvals.c.id == bindparam("b_id"), approvals.c.version == bindparam("b_version")
)
DECIDE_IF_VERSION = SAVE_IF_VERSION.where(approvals.c.deadline > bindparam("b_before"))
DUE = (
    select(approvals)
    .where(approvals.c.next_due_at <= bindparam("now", type_=approvals.c.next_due_at.type))
    .order_by(approvals.c.next_due_at)
    .limit(bindparam("limit"))
)
"""Every statement of a decision is built once, so each call only binds its values."""
BATCH_MOST = 64
"""The most decisions saved together in one transaction."""
GATHER_S = 0.001
"""How long a batch of decisions may wait for as many deciders as the batch before it held:
the callers of one batch come back together, and without it the first back would decide
alone while the others gather behind it."""
READ_CONNECTIONS = 4
"""The most driver connections reading an approval by id, or marking one used, at once
(each takes one round trip, so a few serve a burst of deciders or of resumed runs)."""

logger = logging.getLogger(__name__)
Item = TypeVar("Item")
Outcome = TypeVar("Outcome")


class SqlApprovalStore:
    """Implements ``agent_runtime.store.ApprovalStore`` over one SQLAlchemy engine.

    With ``audit_keys``, every audit entry is signed with the first of them.
    """

    def __init__(self, engine: Engine, audit_keys: AuditKeys | None = None) -> None:
        self.engine = engine
        self._keys = audit_keys
        postgres = engine.dialect.name == "postgresql"
        self._single = (
            engine.execution_options(isolation_level="AUTOCOMMIT") if postgres else reader(engine)
        )
        self._saves = GroupCommit(self.save_approvals, most=BATCH_MOST)
        self._decisions = GroupCommit(self.decide_approvals, most=BATCH_MOST, gather=GATHER_S)
        self._driver = DriverConnections(engine, most=READ_CONNECTIONS)
        self._by_id = Prepared(APPROVAL_BY_ID, engine.dialect, approvals.c)
        self._consume = Prepared(CONSUME, engine.dialect)
        self._decision_sql = DecisionStatements(engine.dialect) if postgres else None

    def _tx(self) -> AbstractContextManager[Connection]:
        return writing(self.engine)

    def _read(self) -> AbstractContextManager[Connection]:
        return reading(self.engine)

    def create_approval(
        self, approval: Approval, audit: AuditDraft, notices: Sequence[Notice] = ()
    ) -> Approval:
        """Store a pending approval, its audit entry and notices unless the id exists."""
        with self._tx() as conn:
            existing = _insert(conn, approval)
            if existing is not None:
                return existing
            write_notices(conn, notices, audit.at)
            Chains(conn, self._keys).append(audit)  # the chain's lock last
        return approval

    def create_ruled_approval(
        self, approval: Approval, audit: AuditDraft, notices: Sequence[Notice], ruling: Ruling
    ) -> Approval:
        """Store the approval and, if its limits allow, the ruling, in one transaction.

        The rules' earlier approvals are read after the rulings' lock is taken: every
        ruling holds it until it commits, so the count includes all of them. (Decisions of
        runs in other shards append at the same time, so a chain's head cannot be that lock.)
        """
        with self._tx() as conn:
            existing = _insert(conn, approval)
            if existing is not None:
                return existing
            chains = Chains(conn, self._keys)
            chains.serialise_rulings()
            if ruling.wake is not None:  # a decision's lock order: the run before the head
                conn.execute(
                    select(runs.c.id).where(runs.c.id == approval.run_id).with_for_update()
                )
            chains.append(audit)
            for draft in ruling.shadows:
                chains.append(draft)
            allowed = ruling.allowed(_ruled(conn, approval, ruling.since)) and (
                ruling.grant is None or ruling.still_granted(locked_grant(conn, ruling.grant))
            )
            last = ruling.decision if allowed else ruling.limited
            if last is not None:
                chains.append(last)
            if not allowed or ruling.decided is None:
                write_notices(conn, notices, audit.at)
                return approval
            stored = replace(ruling.decided, version=approval.version + 1)
            conn.execute(
                update(approvals).where(approvals.c.id == approval.id).values(row_of(stored))
            )
            write_notices(conn, ruling.notices, audit.at)
            if ruling.wake is not None:
                wake = ruling.wake
                deliver(conn, approval.run_id, wake.key, wake.data, wake.delivered_at, strict=False)
        return stored

    def get_approval(self, approval_id: str) -> Approval:
        """Return the approval or raise ApprovalNotFound (one statement compiled once, on an
        autocommit connection)."""
        with translated():
            rows = self._driver.execute(self._by_id, {"approval_id": approval_id}, fetch=True).rows
        if not rows:
            raise ApprovalNotFound(approval_id)
        return approval_of(rows[0])

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
        """Return approvals, newest (or oldest) first, a page after the approval ``after``."""
        ordered = oldest_first_by if oldest_first else newest_first
        query = ordered(select(approvals), APPROVAL_ORDER).limit(limit)
        if after is not None:
            start = self.get_approval(after)
            query = query.where(
                page_after(
                    APPROVAL_ORDER,
                    (start.requested_at, start.position, start.id),
                    ascending=oldest_first,
                )
            )
        if run_id is not None:
            query = query.where(approvals.c.run_id == run_id)
        query = self._filtered(query, status, decidable_by, workspace)
        with self._read() as conn:
            return [approval_of(row) for row in conn.execute(query)]

    def count_approvals(
        self,
        *,
        status: ApprovalStatus | None = None,
        decidable_by: str | Sequence[str] | None = None,
        workspace: str | None = None,
    ) -> int:
        """Return how many approvals ``list_approvals`` would list with these filters."""
        query = self._filtered(
            select(func.count()).select_from(approvals), status, decidable_by, workspace
        )
        with self._read() as conn:
            return int(conn.execute(query).scalar_one())

    def _filtered(
        self,
        query: Select[Any],
        status: ApprovalStatus | None,
        decidable_by: str | Sequence[str] | None,
        workspace: str | None,
    ) -> Select[Any]:
        """``query`` narrowed to approvals with ``status``, that any of ``decidable_by`` may
        decide, asked in ``workspace`` (or from none)."""
        if decidable_by is not None:
            entries = (decidable_by,) if isinstance(decidable_by, str) else decidable_by
            query = query.where(or_(false(), *(self._decidable_by(e) for e in entries)))
        if status is not None:
            query = query.where(approvals.c.status == status.value)
        if workspace is not None:
            dialect = self.engine.dialect.name
            query = query.where(in_workspace(approvals.c.requester, workspace, dialect))
        return query

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
        """Compare-and-set on the version (and on the deadline when deciding).

        Saves made at the same time by other threads go in the same transaction (see
        ``store.approval_saves``), except one that also makes a grant.
        """
        save = Save(approval, audit, decided_before, wake, tuple(notices))
        if grant is not None:
            return self._save_alone(save, grant)
        return self._saves(save)

    def decide_approval(self, approval_id: str, judge: Judge) -> Decided:
        """Judge the approval under its row lock and save what ``judge`` returns; decisions
        taken at the same time by other threads go in the same transaction (see
        ``store.approval_saves``)."""
        return self._decisions(Deciding(approval_id, judge))

    def decide_approvals(self, decisions: Sequence[Deciding]) -> list[Decided | BaseException]:
        """``decide_approval`` of each of ``decisions``, in one transaction.

        If the transaction fails for one decision's sake (not the database's), each is
        carried out alone, and the error is that decision's outcome only.
        """
        try:
            if self._decision_sql is not None:
                return decide_pipelined(self.engine, self._decision_sql, self._keys, decisions)
            with self._tx() as conn:
                return decide_many(conn, self._keys, decisions)
        except StoreUnavailable as error:
            if len(decisions) == 1 or not is_conflict(error):
                raise
        except Exception:
            if len(decisions) == 1:
                raise
            logger.warning("a batch of decisions failed; deciding each alone", exc_info=True)
        return [_outcome(self._decide_alone, decision) for decision in decisions]

    def _decide_alone(self, decision: Deciding) -> Decided:
        outcome = self.decide_approvals([decision])[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    @property
    def save_batches(self) -> tuple[int, int]:
        """How many batches of decisions and saves this store has made, and how many
        decisions and saves they held."""
        return (
            self._saves.batches + self._decisions.batches,
            self._saves.items + self._decisions.items,
        )

    def save_approvals(self, saves: Sequence[Save]) -> list[bool | BaseException]:
        """``save_approval`` of each of ``saves``, in one transaction: whether each was saved.

        If the transaction fails for one save's sake (not the database's), each is saved
        alone, and the error is that save's outcome only.
        """
        if len(saves) == 1:
            return [self._save_alone(saves[0])]
        try:
            with self._tx() as conn:
                return list(save_many(conn, self._keys, saves))
        except StoreUnavailable as error:
            if not is_conflict(error):
                raise
        except Exception:
            logger.warning("a batch of decisions failed; saving each alone", exc_info=True)
        return [_outcome(self._save_alone, save) for save in saves]

    def _save_alone(self, save: Save, grant: Granting | None = None) -> bool:
        approval, audit = save.approval, save.audit
        values = changes(approval) | {
            "version": approval.version + 1,
            "b_id": approval.id,
            "b_version": approval.version,
            "b_before": save.decided_before,
        }
        saved = SAVE_IF_VERSION if save.decided_before is None else DECIDE_IF_VERSION
        with self._tx() as conn:
            if not conn.execute(saved, values).rowcount:
                return False
            write_notices(conn, save.notices, audit.at)
            if (wake := save.wake) is not None:
                deliver(conn, approval.run_id, wake.key, wake.data, wake.delivered_at, strict=False)
            # every decision locks its run's chain's head row: lock it last, so that it is
            # held for the append and the commit only
            chains = Chains(conn, self._keys)
            if grant is not None:
                chains.lock(audit.run_id, grant[1].run_id)
            chains.append(audit)
            if grant is not None and insert_grant(conn, grant[0]) is None:
                write_notices(conn, grant[2], grant[1].at)
                chains.append(grant[1])
        return True

    def consume_approval(self, approval_id: str, position: int) -> bool:
        """Mark the approval used by the execution at ``position``."""
        with translated():
            done = self._driver.execute(self._consume, {"id": approval_id, "position": position})
        return bool(done.rowcount)

    def append_audit(self, audit: AuditDraft) -> AuditEntry:
        """Append an attempt to the audit log."""
        with self._tx() as conn:
            return Chains(conn, self._keys).append(audit)

    def audit_log(self) -> tuple[list[AuditEntry], dict[int, tuple[int, str]]]:
        """Return the entries by shard then number, and every shard's recorded head."""
        with self._read() as conn:
            return read_log(conn)

    def newest_audit_entries(self) -> list[AuditEntry]:
        """Return the newest entry of every chain that has one, by shard."""
        with self._read() as conn:
            return newest_entries(conn)

    def cancel_run(
        self,
        run_id: RunId,
        now: datetime,
        notices: Sequence[Notice],
        close: Closing,
        *,
        while_pending: str | None = None,
    ) -> Run:
        """Cancel the run and close its pending approvals in one transaction (only while
        ``while_pending`` is one of them, if named: ``ApprovalNotPending`` otherwise).

        Locks are taken in a decision's order (approvals, the run's audit head, run), so a
        decision racing the cancel waits for it or is refused, never deadlocks; on PostgreSQL
        the locked read sees a decision committed meanwhile.
        """
        pending = PENDING_OF_RUN
        with self._tx() as conn:
            if conn.dialect.name == "postgresql":
                pending = pending.with_for_update()
            found = [approval_of(row) for row in conn.execute(pending, {"run_id": run_id})]
            if while_pending is not None and while_pending not in {a.id for a in found}:
                raise ApprovalNotPending(while_pending)
            chains = Chains(conn, self._keys)
            chains.lock(run_id)
            run = cancel_in(conn, run_id, now, notices)
            for approval in found:
                closed, audit, more = close(approval)
                conn.execute(
                    update(approvals)
                    .where(approvals.c.id == approval.id)
                    .values(row_of(closed) | {"version": approval.version + 1})
                )
                chains.append(audit)
                write_notices(conn, more, audit.at)
        return run

    def create_grant(self, grant: Grant, audit: AuditDraft, notices: Sequence[Notice]) -> Grant:
        """Store a grant, its audit entry and notices unless its id exists."""
        with self._tx() as conn:
            existing = insert_grant(conn, grant)
            if existing is not None:
                return existing
            write_notices(conn, notices, audit.at)
            Chains(conn, self._keys).append(audit)
        return grant

    def get_grant(self, grant_id: str) -> Grant:
        """Return the grant or raise GrantNotFound."""
        with self._read() as conn:
            found = read_grant(conn, grant_id)
        if found is None:
            raise GrantNotFound(grant_id)
        return found

    def list_grants(
        self,
        *,
        active_at: datetime | None = None,
        tool: str | None = None,
        limit: int = 100,
        granted_by: Actor | None = None,
    ) -> list[Grant]:
        """Return grants, newest first."""
        with self._read() as conn:
            return select_grants(
                conn, active_at=active_at, tool=tool, limit=limit, granted_by=granted_by
            )

    def revoke_grant(
        self, revoked: Grant, audit: AuditDraft, notices: Sequence[Notice]
    ) -> Grant | None:
        """Record the revocation unless the grant is revoked already.

        The update locks the grant's row, so a ruling by it that commits later sees it
        revoked, and one that locked it first commits before the revocation does. Locks are
        taken in a ruling's order (the audit head, then the grant), so the two never deadlock.
        """
        with self._tx() as conn:
            chains = Chains(conn, self._keys)
            chains.lock(audit.run_id)
            if not mark_revoked(conn, revoked):
                return None
            write_notices(conn, notices, audit.at)
            chains.append(audit)
        return revoked

    def _decidable_by(self, user_id: str) -> ColumnElement[bool]:
        """Whether ``user_id`` is among the approvers (the escalation list once escalated)."""
        dialect = self.engine.dialect.name
        return or_(
            and_(
                approvals.c.escalated.is_(False),
                array_has(approvals.c.policy, "approvers", user_id, dialect),
            ),
            and_(
                approvals.c.escalated.is_(True),
                array_has(approvals.c.policy, "escalate_to", user_id, dialect),
            ),
        )

    def due_approvals(self, now: datetime, limit: int = 100) -> list[Approval]:
        """Return up to ``limit`` pending approvals past their deadline or reminder time,
        from the partial index on their next due time (decided ones are not in it)."""
        with translated(), self._single.connect() as conn:
            rows = conn.execute(DUE, {"now": now, "limit": limit})
            return [approval_of(row) for row in rows]


def _insert(conn: Connection, approval: Approval) -> Approval | None:
    """Insert the approval; if its id exists, return the stored one instead."""
    added = conn.execute(
        dialects.insert(approvals, conn.dialect.name)
        .values(row_of(approval))
        .on_conflict_do_nothing(index_elements=["id"])
        .returning(approvals.c.id)
    ).first()
    if added is not None:
        return None
    return approval_of(conn.execute(select(approvals).where(approvals.c.id == approval.id)).one())


def _ruled(conn: Connection, new: Approval, since: datetime) -> list[Approval]:
    """Return the approvals rules approved since ``since`` or in ``new``'s run."""
    query = select(approvals).where(
        approvals.c.status == ApprovalStatus.APPROVED.value,
        or_(approvals.c.decided_at >= since, approvals.c.run_id == new.run_id),
    )
    found = (approval_of(row) for row in conn.execute(query))
    return [approval for approval in found if ruled_since(approval, since, new)]


def _outcome(carry_out: Callable[[Item], Outcome], item: Item) -> Outcome | BaseException:
    """What ``carry_out`` returned for ``item``, or the error it raised."""
    try:
        return carry_out(item)
    except Exception as error:
        return error
