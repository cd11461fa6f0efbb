"""PostgreSQL LISTEN/NOTIFY: wake workers the moment a run becomes due, on any instance.

Polling stays the fallback (and the only mechanism on SQLite, where one host shares one
file): a lost notification only delays a run until the next poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import Connection, Engine, text

logger = logging.getLogger(__name__)

CHANNEL = "signoff_wake"
RECONNECT_S = 5.0


def notify_wake(conn: Connection) -> None:
    """Queue a wake-up, sent by PostgreSQL when the caller's transaction commits."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"NOTIFY {CHANNEL}"))


class WakeListener:
    """A thread that calls ``on_wake`` for every notification (PostgreSQL only)."""

    def __init__(self, engine: Engine, on_wake: Callable[[], object]) -> None:
        self._url = engine.url
        self._postgres = engine.dialect.name == "postgresql"
        self._on_wake = on_wake
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="signoff-listen", daemon=True)

    def start(self) -> None:
        """Start listening (does nothing on SQLite)."""
        if self._postgres:
            self._thread.start()

    def stop(self) -> None:
        """Stop listening."""
        self._stop.set()

    def _run(self) -> None:
        import psycopg

        dsn = self._url.set(drivername="postgresql").render_as_string(hide_password=False)
        while not self._stop.is_set():
            try:
                self._listen(dsn)
            except psycopg.Error:
                logger.warning("listen connection lost", extra={"action": "listen"})
                self._stop.wait(RECONNECT_S)

    def _listen(self, dsn: str) -> None:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            while not self._stop.is_set():
                for _ in conn.notifies(timeout=1.0, stop_after=1):
                    self._on_wake()
