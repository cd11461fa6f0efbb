"""Wake-ups: wake workers the moment a run becomes due.

On PostgreSQL a committed ``NOTIFY`` reaches every listening process, on any host. On
SQLite, and on PostgreSQL behind a transaction pooler (where a ``LISTEN`` does not outlast
the transaction that ran it), a commit wakes the listeners of the same process only;
another process finds the run at its next poll. Polling stays the fallback everywhere: a
lost notification only delays a run until the next poll.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType

from sqlalchemy import Connection, Engine, text

from store.engine import transaction_pooled

logger = logging.getLogger(__name__)

CHANNEL = "signoff_wake"
RECONNECT_S = 5.0
_PENDING = "signoff_wake_pending"

_local_lock = threading.Lock()
_local: dict[str, set[Callable[[], object]]] = {}


def heard_by_listeners(engine: Engine) -> bool:
    """Whether a ``NOTIFY`` reaches the listening processes: on PostgreSQL, unless behind a
    transaction pooler."""
    return engine.dialect.name == "postgresql" and not transaction_pooled(engine)


def notify_wake(conn: Connection) -> None:
    """Ask for a wake-up, sent when the caller's transaction commits."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"NOTIFY {CHANNEL}"))
    woken(conn)


def woken(conn: Connection) -> None:
    """A wake-up is due when the caller's transaction commits (a ``NOTIFY`` for it sent
    already): where listeners hear no ``NOTIFY``, this process's hear of it then."""
    if not heard_by_listeners(conn.engine):
        conn.info[_PENDING] = True


def wake_here(engine: Engine) -> None:
    """After a commit that made runs due, wake this process's listeners where they hear no
    ``NOTIFY``."""
    if not heard_by_listeners(engine):
        _wake_local(engine)


@contextmanager
def transaction(engine: Engine) -> Iterator[Connection]:
    """``engine.begin()`` that, once committed, wakes this process's listeners if asked to.

    A transaction that fails leaves its request behind, to be honoured (harmlessly, as a
    wake-up with nothing new) by the next transaction on the same connection.
    """
    with engine.begin() as conn:
        yield conn
        wake = conn.info.pop(_PENDING, False)
    if wake:
        _wake_local(engine)


def _database(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


def _wake_local(engine: Engine) -> None:
    with _local_lock:
        callbacks = list(_local.get(_database(engine), ()))
    for on_wake in callbacks:
        on_wake()


class WakeListener:
    """Calls ``on_wake`` for every wake-up: a PostgreSQL listening thread, or (on SQLite or
    behind a transaction pooler) the commits of this process."""

    def __init__(self, engine: Engine, on_wake: Callable[[], object]) -> None:
        self._url = engine.url
        self._database = _database(engine)
        self._postgres = heard_by_listeners(engine)
        self._on_wake = on_wake
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="signoff-listen", daemon=True)

    def __enter__(self) -> WakeListener:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start listening."""
        if self._postgres:
            self._thread.start()
            return
        with _local_lock:
            _local.setdefault(self._database, set()).add(self._on_wake)

    def stop(self) -> None:
        """Stop listening."""
        self._stop.set()
        with _local_lock:
            _local.get(self._database, set()).discard(self._on_wake)

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
            self._on_wake()  # what fell due while not listening
            while not self._stop.is_set():
                for _ in conn.notifies(timeout=1.0, stop_after=1):
                    self._on_wake()
