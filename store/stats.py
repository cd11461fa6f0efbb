"""Counts for monitoring, read with a few cheap aggregate queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, Connection, Engine, func, select

from store.errors import translated
from store.models import approvals, audit_log, outbox, runs

OUTCOMES = ("approved", "rejected", "expired")
"""How approvals end: counted from the approvals themselves."""
REFUSALS = ("unauthorized", "late", "stale")
UNSENT = ("pending", "dead")
"""Decisions refused: counted from the audit log, which records each one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats:
    """What the database holds now, counted."""

    runs: dict[str, int]
    approvals_pending: int
    oldest_pending_approval: datetime | None
    decisions: dict[str, int]
    outbox: dict[str, int]
    oldest_undelivered: datetime | None
    expired_leases: int


def read_stats(engine: Engine, now: datetime) -> Stats:
    """Count runs, approvals, decisions and notices (``StoreUnavailable`` if down)."""
    with translated(), engine.connect() as conn:
        pending = conn.execute(
            select(func.count(), func.min(approvals.c.requested_at)).where(
                approvals.c.status == "pending"
            )
        ).one()
        return Stats(
            runs=_grouped(conn, runs.c.status),
            approvals_pending=int(pending[0]),
            oldest_pending_approval=pending[1],
            decisions=_decisions(conn),
            outbox=_unsent(conn),
            oldest_undelivered=conn.execute(
                select(func.min(outbox.c.created_at)).where(outbox.c.status == "pending")
            ).scalar(),
            expired_leases=int(
                conn.execute(
                    select(func.count())
                    .select_from(runs)
                    .where(runs.c.status == "running", runs.c.due_at < now)
                ).scalar_one()
            ),
        )


def _grouped(conn: Connection, column: Column[str]) -> dict[str, int]:
    """Return the row count of each value of ``column`` (a column of one table)."""
    query = select(column, func.count()).group_by(column)
    return {str(value): int(count) for value, count in conn.execute(query)}


def _unsent(conn: Connection) -> dict[str, int]:
    """Return how many notices wait (``pending``) or were given up (``dead``): the sent ones,
    nearly all of them, are left uncounted."""
    query = (
        select(outbox.c.status, func.count())
        .where(outbox.c.status.in_(UNSENT))
        .group_by(outbox.c.status)
    )
    found = {str(status): int(count) for status, count in conn.execute(query)}
    return {status: found.get(status, 0) for status in UNSENT}


def _decisions(conn: Connection) -> dict[str, int]:
    """Return how many approvals ended each way and how many decisions were refused why."""
    refused = (
        select(audit_log.c.action, func.count())
        .where(audit_log.c.action.in_(REFUSALS))
        .group_by(audit_log.c.action)
    )
    found = _grouped(conn, approvals.c.status) | {
        str(action): int(count) for action, count in conn.execute(refused)
    }
    return {outcome: found.get(outcome, 0) for outcome in (*OUTCOMES, *REFUSALS)}
