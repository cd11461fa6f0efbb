"""The outbox's rows: the states a notice goes through, and how notices are inserted."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

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
    rows = [
        {
            "key": n.key,
            "run_id": n.run_id,
            "kind": n.kind,
            "data": n.data,
            "created_at": now,
            "status": PENDING,
            "attempts": 0,
            "next_at": due or now,
            "fence": 0,
            "team_id": n.team_id,
            "enterprise_id": n.enterprise_id,
        }
        for n in notices
    ]
    conn.execute(QUEUE[conn.dialect.name], rows)


__all__ = ["DEAD", "PENDING", "SENT", "insert_notices"]
