"""The outbox on SQLAlchemy Core: notices written with the changes that cause them."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, select

from agent_runtime.notices import DeadNotice, Delivery, Notice, QueuedNotice
from store.connections import writing
from store.driver import DriverConnections, Prepared
from store.errors import translated
from store.home_tabs import HOME_REFRESH, queue_refreshes
from store.models import outbox
from store.outbox_rows import DEAD, PENDING, SENT, insert_notices
from store.outbox_sql import WEBHOOK, OutboxStatements


def write_notices(conn: Connection, notices: Sequence[Notice], now: datetime) -> None:
    """Queue ``notices`` inside the caller's transaction; keys already queued are skipped,
    and Home tab refreshes are kept to the people who opened theirs, one waiting each."""
    refreshes = [n for n in notices if n.kind == HOME_REFRESH]
    insert_notices(conn, [n for n in notices if n.kind != HOME_REFRESH], now)
    queue_refreshes(conn, refreshes, now)


class SqlOutbox:
    """Implements ``agent_runtime.notices.Outbox`` over one SQLAlchemy engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._driver = DriverConnections(engine)
        self._sql = OutboxStatements(engine.dialect)

    def _tx(self) -> AbstractContextManager[Connection]:
        return writing(self.engine)

    def enqueue(self, notices: Sequence[Notice], now: datetime) -> None:
        """Queue notices on their own."""
        with self._tx() as conn:
            write_notices(conn, notices, now)

    def claim_due(
        self, owner: str, *, now: datetime, until: datetime, limit: int, webhooks: bool = False
    ) -> list[QueuedNotice]:
        """Claim due notices, oldest first, never one whose run has an older one undelivered;
        only webhooks with ``webhooks``, else only the others."""
        statement = self._sql.claim_webhooks if webhooks else self._sql.claim
        values = {"owner": owner, "now": now, "until": until, "limit": limit}
        with translated():
            rows = self._driver.execute(statement, values, fetch=True).rows
        return sorted((_queued(r) for r in rows), key=lambda q: q.id)

    def begin_send(self, item: QueuedNotice, *, now: datetime, until: datetime) -> bool:
        """Mark the send begun (keeping the earliest such time) and extend the claim."""
        return self._fenced(self._sql.begin_send, item, at=now, until=until)

    def delivered(self, item: QueuedNotice, delivery: Delivery | None, now: datetime) -> bool:
        """Record the delivery."""
        channel, ts = (None, None) if delivery is None else (delivery.channel, delivery.ts)
        return self._fenced(self._sql.delivered, item, at=now, landed_in=channel, landed_ts=ts)

    def retry_later(
        self, item: QueuedNotice, at: datetime, error: str, *, maybe_sent: bool = False
    ) -> bool:
        """Release the claim for another attempt at ``at``."""
        statement = self._sql.retry if maybe_sent else self._sql.retry_not_sent
        return self._fenced(statement, item, at=at, error=error[:2000])

    def give_up(self, item: QueuedNotice, error: str) -> bool:
        """Mark the notice dead: it stops holding up its run's later notices."""
        return self._fenced(self._sql.give_up, item, error=error[:2000])

    def delivery_of(self, key: str) -> Delivery | None:
        """Return where ``key`` was delivered."""
        with translated():
            rows = self._driver.execute(self._sql.delivery, {"notice_key": key}, fetch=True).rows
        if not rows or rows[0].channel is None or rows[0].ts is None:
            return None
        return Delivery(channel=rows[0].channel, ts=rows[0].ts)

    def is_dead(self, key: str) -> bool:
        """Tell whether ``key`` was given up."""
        with translated():
            rows = self._driver.execute(self._sql.status, {"notice_key": key}, fetch=True).rows
        return bool(rows and rows[0].status == DEAD)

    def dead_notices(self, limit: int) -> list[DeadNotice]:
        """Return the notices given up, newest first."""
        query = (
            select(outbox).where(outbox.c.status == DEAD).order_by(outbox.c.id.desc()).limit(limit)
        )
        with self._tx() as conn:
            rows = conn.execute(query).all()
        return [
            DeadNotice(
                key=r.key,
                run_id=r.run_id,
                kind=r.kind,
                created_at=r.created_at,
                attempts=r.attempts,
                error=r.last_error,
            )
            for r in rows
        ]

    def _fenced(self, statement: Prepared, item: QueuedNotice, **values: Any) -> bool:
        """Run a fenced update of the notice (one statement, a transaction of its own): it
        changes the row only while ``item``'s claim is the latest; tell whether it was."""
        fence = {"item_id": item.id, "item_fence": item.fence}
        with translated():
            return self._driver.execute(statement, fence | values).rowcount == 1


def _queued(row: Any) -> QueuedNotice:
    notice = Notice(
        key=row.key,
        run_id=row.run_id,
        kind=row.kind,
        data=row.data,
        team_id=row.team_id,
        enterprise_id=row.enterprise_id,
    )
    return QueuedNotice(
        id=row.id,
        notice=notice,
        attempts=row.attempts,
        created_at=row.created_at,
        channel=row.channel,
        ts=row.ts,
        fence=row.fence,
        uncertain=row.sending_at is not None,
        sending_since=row.sending_at,
    )


__all__ = ["DEAD", "PENDING", "SENT", "WEBHOOK", "SqlOutbox", "write_notices"]
