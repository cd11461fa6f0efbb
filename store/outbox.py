"""The outbox on SQLAlchemy Core: notices written with the changes that cause them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, case, exists, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from agent_runtime.notices import Delivery, Notice, QueuedNotice
from store.errors import translated
from store.models import outbox

PENDING, SENT, DEAD = "pending", "sent", "dead"


def write_notices(conn: Connection, notices: Sequence[Notice], now: datetime) -> None:
    """Queue ``notices`` inside the caller's transaction; keys already queued are skipped."""
    if not notices:
        return
    rows = [{"key": n.key, "run_id": n.run_id, "kind": n.kind, "data": n.data,
             "created_at": now, "status": PENDING, "attempts": 0, "next_at": now}
            for n in notices]
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(dialect.insert(outbox).values(rows).on_conflict_do_nothing(
        index_elements=["key"]))


class SqlOutbox:
    """Implements ``agent_runtime.notices.Outbox`` over one SQLAlchemy engine."""

    def __init__(self, engine: Engine, *, max_attempts: int = 12) -> None:
        self.engine = engine
        self.max_attempts = max_attempts

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        with translated(), self.engine.begin() as conn:
            yield conn

    def enqueue(self, notices: Sequence[Notice], now: datetime) -> None:
        """Queue notices on their own."""
        with self._tx() as conn:
            write_notices(conn, notices, now)

    def claim_due(self, owner: str, *, now: datetime, until: datetime, limit: int) -> list[
        QueuedNotice
    ]:
        """Claim due notices, oldest first, never one whose run has an older one undelivered."""
        older = outbox.alias("older")
        blocked = exists().where(older.c.run_id == outbox.c.run_id, older.c.id < outbox.c.id,
                                 older.c.status == PENDING)
        query = (select(outbox.c.id).where(
            outbox.c.status == PENDING, outbox.c.next_at <= now,
            or_(outbox.c.claimed_until.is_(None), outbox.c.claimed_until <= now),
            or_(outbox.c.run_id.is_(None), ~blocked))
            .order_by(outbox.c.id).limit(limit))
        if self.engine.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True, of=outbox)
        with self._tx() as conn:
            ids = list(conn.execute(query).scalars())
            if not ids:
                return []
            rows = conn.execute(update(outbox).where(outbox.c.id.in_(ids))
                                .values(claimed_by=owner, claimed_until=until,
                                        attempts=outbox.c.attempts + 1)
                                .returning(*outbox.c)).all()
        return sorted((_queued(r) for r in rows), key=lambda q: q.id)

    def delivered(self, item_id: int, delivery: Delivery | None, now: datetime) -> None:
        """Record the delivery."""
        values: dict[str, Any] = {"status": SENT, "delivered_at": now, "claimed_until": None}
        if delivery is not None:
            values |= {"channel": delivery.channel, "ts": delivery.ts}
        with self._tx() as conn:
            conn.execute(update(outbox).where(outbox.c.id == item_id).values(values))

    def retry_later(self, item_id: int, at: datetime, error: str) -> None:
        """Release the claim for another attempt at ``at`` (dead after too many)."""
        with self._tx() as conn:
            conn.execute(
                update(outbox).where(outbox.c.id == item_id).values(
                    next_at=at, claimed_until=None, last_error=error[:2000],
                    status=_status_after(outbox.c.attempts, self.max_attempts)))

    def give_up(self, item_id: int, error: str) -> None:
        """Mark the notice dead: it stops holding up its run's later notices."""
        with self._tx() as conn:
            conn.execute(update(outbox).where(outbox.c.id == item_id).values(
                status=DEAD, claimed_until=None, last_error=error[:2000]))

    def delivery_of(self, key: str) -> Delivery | None:
        """Return where ``key`` was delivered."""
        with self._tx() as conn:
            row = conn.execute(select(outbox.c.channel, outbox.c.ts)
                               .where(outbox.c.key == key, outbox.c.status == SENT)).first()
        if row is None or row.channel is None or row.ts is None:
            return None
        return Delivery(channel=row.channel, ts=row.ts)


def _status_after(attempts: Any, max_attempts: int) -> Any:
    return case((attempts >= max_attempts, DEAD), else_=PENDING)


def _queued(row: Any) -> QueuedNotice:
    notice = Notice(key=row.key, run_id=row.run_id, kind=row.kind, data=row.data)
    return QueuedNotice(id=row.id, notice=notice, attempts=row.attempts,
                        created_at=row.created_at, channel=row.channel, ts=row.ts)


__all__ = ["SqlOutbox", "write_notices"]
