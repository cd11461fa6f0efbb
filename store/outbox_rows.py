"""The outbox's rows: the states a notice goes through, and how notices are inserted."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from agent_runtime.notices import Notice
from store.dialects import PerDialect, insert
from store.models import outbox

PENDING, SENT, DEAD = "pending", "sent", "dead"

QUEUE = PerDialect(lambda name: insert(outbox, name).on_conflict_do_nothing(index_elements=["key"]))
"""The notice INSERT of each dialect, built once; each call sends its rows in one batch."""


def insert_notices(
    conn: Connection, notices: Sequence[Notice], now: datetime, *, due: datetime | None = None
) -> None:
    """Insert ``notices``, due at ``due`` (else at once), skipping keys already queued."""
    if not notices:
        return
    rows = [queued_row(n, now, due) for n in notices]
    conn.execute(QUEUE[conn.dialect.name], rows)


QUEUED = (
    "key",
    "run_id",
    "kind",
    "data",
    "created_at",
    "status",
    "attempts",
    "next_at",
    "fence",
    "team_id",
    "enterprise_id",
)
"""The columns ``queued_row`` gives a value."""


def queued_row(notice: Notice, now: datetime, due: datetime | None = None) -> dict[str, Any]:
    """The outbox row of ``notice`` queued at ``now``, due at ``due`` (else at once)."""
    return {
        "key": notice.key,
        "run_id": notice.run_id,
        "kind": notice.kind,
        "data": notice.data,
        "created_at": now,
        "status": PENDING,
        "attempts": 0,
        "next_at": due or now,
        "fence": 0,
        "team_id": notice.team_id,
        "enterprise_id": notice.enterprise_id,
    }


__all__ = ["DEAD", "PENDING", "QUEUED", "SENT", "insert_notices", "queued_row"]
