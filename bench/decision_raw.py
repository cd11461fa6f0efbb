"""The raw limits a decision is measured against, on PostgreSQL and SQLite.

Each raw decision is one transaction, on one connection per thread, of the statements a
decision cannot do without: the approval's compare-and-set UPDATE and its audit entry. How
the entry is chained is what the variants compare:

* ``sharded``: the head row of the approval's shard locked, the entry inserted after it and
  the head moved (what Signoff does now, one chain per shard of runs);
* ``one head``: the same through a single head row (what Signoff did before: every decision
  waits for the one before it);
* ``none``: the entry inserted alone, unchained (what no tamper evidence would cost).

On SQLite every write transaction takes the database's lock, so only ``sharded`` is run
there: the others differ by nothing but the head row's number.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
import zlib
from collections.abc import Callable
from typing import Any, Literal

import psycopg

from agent_runtime.audit import AUDIT_SHARDS

Chaining = Literal["sharded", "one head", "none"]
DETAIL = '{"decision": "approve"}'

DDL = [
    "CREATE TABLE raw_approvals (id text PRIMARY KEY, status text, version int)",
    "CREATE TABLE raw_audit (shard int, seq int, approval_id text, detail text, "
    "prev_hash text, hash text, PRIMARY KEY (shard, seq))",
    "CREATE TABLE raw_head (id int PRIMARY KEY, seq int, hash text)",
    "CREATE TABLE raw_entries (seq INTEGER PRIMARY KEY, approval_id text, detail text, "
    "prev_hash text, hash text)",
]
"""The tables; on PostgreSQL the unchained entries' number is ``serial`` (SQLite numbers an
INTEGER PRIMARY KEY itself)."""
CAS = (
    "UPDATE raw_approvals SET status = 'approved', version = version + 1 "
    "WHERE id = ? AND version = 0"
)
LOCK = "SELECT seq, hash FROM raw_head WHERE id = ?"
ADD = (
    "INSERT INTO raw_audit (shard, seq, approval_id, detail, prev_hash, hash) "
    "VALUES (?, (SELECT seq + 1 FROM raw_head WHERE id = ?), ?, ?, 'p', 'h')"
)
MOVE = "UPDATE raw_head SET seq = seq + 1, hash = 'h' WHERE id = ?"
UNCHAINED = "INSERT INTO raw_entries (approval_id, detail, prev_hash, hash) VALUES (?, ?, 'p', 'h')"


def _pg(statement: str) -> str:
    return statement.replace("?", "%s")


def create_tables(execute: Callable[[str], Any], *, pg: bool) -> None:
    """Create the raw tables with ``execute`` (autocommit), one head row per shard."""
    for statement in DDL:
        execute(statement.replace("INTEGER PRIMARY KEY", "serial PRIMARY KEY") if pg else statement)
    for shard in range(AUDIT_SHARDS):
        execute(f"INSERT INTO raw_head VALUES ({shard}, 0, 'g')")


def _shard(approval: str, chaining: Chaining) -> int:
    return zlib.crc32(approval.encode()) % AUDIT_SHARDS if chaining == "sharded" else 0


def pg_decision(conn: psycopg.Connection[Any], approval: str, chaining: Chaining) -> None:
    """One raw decision on PostgreSQL."""
    shard = _shard(approval, chaining)
    with conn.transaction():
        assert conn.execute(_pg(CAS), (approval,)).rowcount == 1
        if chaining == "none":
            conn.execute(_pg(UNCHAINED), (approval, DETAIL))
            return
        conn.execute(_pg(LOCK) + " FOR UPDATE", (shard,))
        conn.execute(_pg(ADD), (shard, shard, approval, DETAIL))
        conn.execute(_pg(MOVE), (shard,))


def sqlite_decision(conn: sqlite3.Connection, approval: str, chaining: Chaining) -> None:
    """One raw decision on SQLite (``BEGIN IMMEDIATE``, as Signoff's write transactions)."""
    shard = _shard(approval, chaining)
    conn.execute("BEGIN IMMEDIATE")
    try:
        assert conn.execute(CAS, (approval,)).rowcount == 1
        conn.execute(LOCK, (shard,))
        conn.execute(ADD, (shard, shard, approval, DETAIL))
        conn.execute(MOVE, (shard,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class RawDecisions:
    """Raw decisions on one database: PostgreSQL (a DSN) or SQLite (a file path)."""

    def __init__(self, dsn: str | None = None, path: str | None = None) -> None:
        self._dsn, self._path = dsn, path
        self._local = threading.local()
        self._opened: list[Any] = []
        with self._autocommit() as execute:
            create_tables(execute, pg=dsn is not None)

    def pending(self, count: int) -> list[str]:
        """Insert ``count`` pending raw approvals; return their ids."""
        ids = [uuid.uuid4().hex[:24] for _ in range(count)]
        with self._autocommit() as execute:
            for approval in ids:
                execute(f"INSERT INTO raw_approvals VALUES ('{approval}', 'pending', 0)")
            execute("ANALYZE")  # as decide's database is (bench.decisions.Bench.pending)
        return ids

    def decide(self, approval: str, chaining: Chaining) -> None:
        """Decide ``approval`` on this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
            self._opened.append(conn)
        if self._dsn is not None:
            pg_decision(conn, approval, chaining)
        else:
            sqlite_decision(conn, approval, chaining)

    def close(self) -> None:
        """Close every connection the threads opened."""
        for conn in self._opened:
            conn.close()
        self._opened.clear()
        self._local = threading.local()

    def _connect(self) -> Any:
        if self._dsn is not None:
            return psycopg.connect(self._dsn)
        assert self._path is not None
        conn = sqlite3.connect(
            self._path, isolation_level=None, timeout=60, check_same_thread=False
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")  # as Signoff's engine
        return conn

    def _autocommit(self) -> Any:
        return _Autocommit(self._dsn, self._path)


class _Autocommit:
    """A short-lived autocommit connection yielding its ``execute``."""

    def __init__(self, dsn: str | None, path: str | None) -> None:
        self._dsn, self._path = dsn, path
        self._conn: Any = None

    def __enter__(self) -> Callable[[str], Any]:
        if self._dsn is not None:
            self._conn = psycopg.connect(self._dsn, autocommit=True)
        else:
            self._conn = sqlite3.connect(self._path or "", isolation_level=None)
        return self._conn.execute  # type: ignore[no-any-return]

    def __exit__(self, *exc: object) -> None:
        self._conn.close()
