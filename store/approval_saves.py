"""Saving several approvals' decisions in one transaction, in a few statements.

Concurrent decisions (a burst of clicks, several deciders) are saved together (see
``store.group_commit``): one transaction, and per batch rather than per decision the
statements that lock and check the approvals, write them, queue their notices, deliver
their wake-ups and append their audit entries. Each decision keeps the meaning of a lone
compare-and-set: it is saved only if its approval still has the version it was judged on
(and, when deciding, a deadline later than the decision's time), in the order of the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from agent_runtime.approvals import Approval
from agent_runtime.audit import AuditDraft
from agent_runtime.audit_keys import AuditKeys
from agent_runtime.notices import Notice
from agent_runtime.records import Event
from store.approval_rows import changes
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
SAVE_BY_ID = update(approvals).where(approvals.c.id == bindparam("b_id"))
"""The statements of a batch, built once: the rows are locked (in id order, as every batch
locks them) and checked before they are written by id."""


@dataclass(frozen=True, slots=True)
class Save:
    """One compare-and-set of an approval, with what its transaction writes beside it."""

    approval: Approval
    audit: AuditDraft
    decided_before: datetime | None
    wake: Event | None
    notices: Sequence[Notice]


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
    winners = [save for save, holds in zip(saves, saved, strict=True) if holds]
    if not winners:
        return saved
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
    return saved


def _holds(stored: tuple[int, datetime] | None, save: Save) -> bool:
    if stored is None or stored[0] != save.approval.version:
        return False
    return save.decided_before is None or stored[1] > save.decided_before


def _written(approval: Approval) -> dict[str, Any]:
    return changes(approval) | {"version": approval.version + 1, "b_id": approval.id}
