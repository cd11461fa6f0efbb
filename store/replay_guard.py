"""Remembers the signatures of handled Slack requests, so a replayed one is refused."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Engine, delete, insert
from sqlalchemy import exc as sa_exc

from store.errors import is_unique_violation, translated
from store.models import seen_requests

REPLAY_WINDOW = timedelta(minutes=10)
"""Longer than the 5 minutes in which Slack's signature check accepts a timestamp."""


class SqlReplayGuard:
    """A request's signature is accepted once; the table forgets what has expired anyway."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def first_time(self, signature: str, now: datetime) -> bool:
        """Record ``signature``; False if it was seen before (a replay)."""
        try:
            with translated(), self.engine.begin() as conn:
                conn.execute(insert(seen_requests).values(signature=signature[:80], seen_at=now))
                conn.execute(
                    delete(seen_requests).where(seen_requests.c.seen_at < now - REPLAY_WINDOW)
                )
        except sa_exc.IntegrityError as exc:
            if is_unique_violation(exc):
                return False
            raise
        return True
