"""Deciding and saving several approvals in one transaction, in a few statements.

Concurrent decisions (a burst of clicks, several deciders) are carried out together (see
``store.group_commit``): one transaction, and per batch rather than per decision the
statements that lock and read the approvals, write them, queue their notices, deliver
their wake-ups and append their audit entries. ``decide_many`` judges each approval as
stored, under its row lock, in the order of the batch (a later decision of the same
approval is judged on what the earlier one left); ``save_many`` saves decisions judged
beforehand, each only if its approval still has the version it was judged on (and, when
deciding, a deadline later than the decision's time): a lone compare-and-set's meaning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from agent_runtime.approvals import Approval
from agent_runtime.audit_keys import AuditKeys
from agent_runtime.exceptions import ApprovalNotFound
from agent_runtime.store import Judge, Save
from store.approval_rows import approval_of, changes
from store.audit_chains import Chains
from store.models import approvals
from store.outbox import write_notices
from store.wake import Delivery, deliver_many

LOCK_APPROVALS = (
    select(approvals.c.id, approvals.c.version, approvals.c.deadline)
    .where(approvals.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(approvals.c.id)
    .with_for_update()
)
LOCK_AND_READ = (
    select(approvals)
    .where(approvals.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(approvals.c.id)
    .with_for_update()
)
SAVE_BY_ID = update(approvals).where(approvals.c.id == bindparam("b_id"))
"""The statements of a batch, built once: the rows are locked (in id order, as every batch
locks them) and checked, or read, before they are written by id."""


@dataclass(frozen=True, slots=True)
class Deciding:
    """A decision to take on an approval as stored: ``judge`` says what to save."""

    approval_id: str
    judge: Judge


Decided = tuple[Approval, Save | None]
"""The approval as a decision's judge saw it, and what it saved."""


class ChangedUnderLock(RuntimeError):
    """A judge returned a save that does not hold on the approval it was given."""


def decide_many(
    conn: Connection, keys: AuditKeys | None, decisions: Sequence[Deciding]
) -> list[Decided | BaseException]:
    """Judge and save each of ``decisions`` in order, in ``conn``'s transaction: each
    approval read under its row lock, each judge given the approval as the decisions before
    it left it. Returns each one's outcome: what its judge saw and saved, or the error that
    is its alone (no such approval, its judge's exception)."""
    ids = sorted({decision.approval_id for decision in decisions})
    locked = [approval_of(row) for row in conn.execute(LOCK_AND_READ, {"ids": ids})]
    outcomes, winners = judge_in_order(locked, decisions)
    _write(conn, keys, winners)
    return outcomes


def judge_in_order(
    locked: Sequence[Approval], decisions: Sequence[Deciding]
) -> tuple[list[Decided | BaseException], list[Save]]:
    """Judge each of ``decisions`` in order on the approvals ``locked`` as stored, each on
    what the decisions before it left; return every outcome and the saves to write."""
    latest: dict[str, Approval] = {approval.id: approval for approval in locked}
    outcomes: list[Decided | BaseException] = []
    winners = []
    for decision in decisions:
        current = latest.get(decision.approval_id)
        if current is None:
            outcomes.append(ApprovalNotFound(decision.approval_id))
            continue
        try:
            save = decision.judge(current)
            if save is not None and not _holds((current.version, current.deadline), save):
                raise ChangedUnderLock(f"approval {current.id} was saved from another copy")
        except Exception as error:  # that decision's alone: the others go on
            outcomes.append(error)
            continue
        if save is not None:
            latest[current.id] = replace(save.approval, version=save.approval.version + 1)
            winners.append(save)
        outcomes.append((current, save))
    return outcomes, winners


def save_many(conn: Connection, keys: AuditKeys | None, saves: Sequence[Save]) -> list[bool]:
    """Save each of ``saves`` whose compare-and-set holds, in order, in ``conn``'s
    transaction; return which were saved."""
    ids = sorted({save.approval.id for save in saves})
    stored: dict[str, tuple[int, datetime]] = {
        row.id: (row.version, row.deadline) for row in conn.execute(LOCK_APPROVALS, {"ids": ids})
    }
    saved = []
    for save in saves:
        holds = _holds(stored.get(save.approval.id), save)
        if holds:  # a later save of the same approval in the batch sees this one
            stored[save.approval.id] = (save.approval.version + 1, save.approval.deadline)
        saved.append(holds)
    _write(conn, keys, [save for save, holds in zip(saves, saved, strict=True) if holds])
    return saved


def _write(conn: Connection, keys: AuditKeys | None, winners: Sequence[Save]) -> None:
    """Write ``winners``' approvals, notices, wake-ups and audit entries, a statement each."""
    if not winners:
        return
    conn.execute(SAVE_BY_ID, [_written(save.approval) for save in winners])
    now = max(save.audit.at for save in winners)
    write_notices(conn, [notice for save in winners for notice in save.notices], now)
    deliver_many(
        conn,
        [
            Delivery(save.approval.run_id, save.wake.key, save.wake.data, save.wake.delivered_at)
            for save in winners
            if save.wake is not None
        ],
    )
    # the chains' heads last, as every decision locks them: held for the append and commit
    Chains(conn, keys).append_many([save.audit for save in winners])


def _holds(stored: tuple[int, datetime] | None, save: Save) -> bool:
    if stored is None or stored[0] != save.approval.version:
        return False
    return save.decided_before is None or stored[1] > save.decided_before


def _written(approval: Approval) -> dict[str, Any]:
    return changes(approval) | {"version": approval.version + 1, "b_id": approval.id}
