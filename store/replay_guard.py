"""Remembers the signatures of handled Slack requests, so a replayed one is refused.

A request acknowledged before its work is done (a command that starts a run) is recorded with
that work in the same single-statement write, so the work survives a crash after the ack: any
process finds it unfinished and does it (``unfinished``/``finish``). Expired signatures are
deleted by ``expire``, off the request path.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy import exc as sa_exc

from store.driver import DriverConnections, Prepared
from store.errors import is_unique_violation, translated
from store.models import seen_requests

REPLAY_WINDOW = timedelta(minutes=10)
"""Longer than the 5 minutes in which Slack's signature check accepts a timestamp."""
SIGNATURE_CHARS = 80


class SqlReplayGuard:
    """A request's signature is accepted once; what has expired is forgotten by ``expire``."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # one statement compiled once, on a driver connection in autocommit: one round trip,
        # no BEGIN and COMMIT, no pool checkout (see store.driver)
        self._driver = DriverConnections(engine)
        self._record = Prepared(insert(seen_requests), engine.dialect)

    def warm(self, connections: int) -> None:
        """Open ``connections`` for the writes before acks now, so that the first burst of
        requests does not open them on its way (best effort: what fails is opened later)."""
        with contextlib.suppress(sa_exc.DBAPIError):
            self._driver.keep_open(connections)

    def first_time(self, signature: str, now: datetime, work: Any = None) -> bool:
        """Record ``signature`` (with the ``work`` it stands for); False if it was seen before.

        This runs before every Slack request is acknowledged: one INSERT, nothing else."""
        row = {"signature": signature[:SIGNATURE_CHARS], "seen_at": now, "work": work}
        try:
            with translated():
                self._driver.execute(self._record, row)
        except sa_exc.IntegrityError as exc:
            if is_unique_violation(exc):
                return False
            raise
        return True

    def finish(self, signature: str) -> None:
        """Mark the work recorded with ``signature`` done."""
        with translated(), self.engine.begin() as conn:
            conn.execute(
                update(seen_requests)
                .where(seen_requests.c.signature == signature[:SIGNATURE_CHARS])
                .values(work=None)
            )

    def unfinished(self, seen_before: datetime, limit: int = 100) -> list[tuple[str, Any]]:
        """Return (signature, work) of requests seen before ``seen_before`` whose work is not
        done, oldest first."""
        query = (
            select(seen_requests.c.signature, seen_requests.c.work)
            .where(seen_requests.c.work.is_not(None), seen_requests.c.seen_at < seen_before)
            .order_by(seen_requests.c.seen_at)
            .limit(limit)
        )
        with translated(), self.engine.connect() as conn:
            return [(row.signature, row.work) for row in conn.execute(query)]

    def expire(self, now: datetime) -> int:
        """Forget the signatures that can no longer be replayed (never undone work); return
        how many."""
        with translated(), self.engine.begin() as conn:
            result = conn.execute(
                delete(seen_requests).where(
                    seen_requests.c.seen_at < now - REPLAY_WINDOW,
                    seen_requests.c.work.is_(None),
                )
            )
        return int(result.rowcount or 0)
