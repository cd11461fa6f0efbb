"""The demo payment provider's ledger: a SQLite file of requests received, charges, emails.

WAL mode, readable by other processes and kept across restarts; at most one charge per
idempotency key and one email per ``dedupe_id``, even with two providers on one file.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Final, Literal

from devkit.demo.errors import LedgerError
from devkit.demo.records import Charge, Email, LedgerEntry, Received

_SCHEMA_VERSION: Final = 1

ChargeOutcome = Literal["created", "replayed", "conflict"]
EmailOutcome = Literal["created", "replayed"]
_OUTCOME_STATUS: Final[Mapping[str, int]] = {"created": 201, "replayed": 200, "conflict": 409}


_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    idempotency_key TEXT,
    body TEXT NOT NULL,
    status INTEGER NOT NULL,
    created_charge INTEGER NOT NULL CHECK (created_charge IN (0, 1)),
    charge_id TEXT,
    email_id TEXT
);
CREATE TABLE IF NOT EXISTS charges (
    id TEXT PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    order_id TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    currency TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS emails (
    id TEXT PRIMARY KEY,
    dedupe_id TEXT NOT NULL UNIQUE,
    "to" TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""


class Ledger:
    """The provider's durable record: requests received, charges made, emails sent.

    One SQLite connection shared by the server's threads behind a lock; every write is a
    ``BEGIN IMMEDIATE`` transaction, so two providers on one file cannot both create a
    charge for one key either.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(
                self.path, timeout=10.0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open the demo ledger {self.path}: {exc}") from exc
        self._db.row_factory = sqlite3.Row
        try:
            self._migrate()
        except (sqlite3.Error, LedgerError) as exc:
            self._db.close()
            if isinstance(exc, LedgerError):
                raise
            raise LedgerError(f"cannot open the demo ledger {self.path}: {exc}") from exc

    def _migrate(self) -> None:
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        with self._write() as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > _SCHEMA_VERSION:
                raise LedgerError(f"{self.path} is a newer ledger (version {version})")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the connection; the file stays."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, *params: object) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def record(self, received: Received, status: int) -> int:
        """Record a request that created nothing; return its sequence number."""
        with self._write() as db:
            return _insert_request(db, received, status)

    def create_charge(
        self, received: Received, order_id: str, amount_cents: int, currency: str
    ) -> tuple[ChargeOutcome, Charge]:
        """Create the refund for ``received``'s key unless one exists; record the request.

        Returns ``created``, ``replayed`` (same key, same values: the existing refund) or
        ``conflict`` (same key, other values: the existing refund, which is left alone).
        """
        key = received.idempotency_key
        if key is None:
            raise ValueError("a charge needs an idempotency key")
        with self._write() as db:
            row = db.execute("SELECT * FROM charges WHERE idempotency_key = ?", (key,)).fetchone()
            if row is None:
                charge = Charge(_new_id("re"), key, order_id, amount_cents, currency, _now())
                _insert_charge(db, charge)
                outcome: ChargeOutcome = "created"
            else:
                charge = _charge(row)
                same = (charge.order_id, charge.amount_cents, charge.currency)
                outcome = "replayed" if same == (order_id, amount_cents, currency) else "conflict"
            _insert_request(
                db,
                received,
                _OUTCOME_STATUS[outcome],
                created_charge=outcome == "created",
                charge_id=None if outcome == "conflict" else charge.id,
            )
        return outcome, charge

    def create_email(
        self, received: Received, to: str, subject: str, body: str, dedupe_id: str
    ) -> tuple[EmailOutcome, Email]:
        """Send the email unless one with ``dedupe_id`` was sent; record the request."""
        with self._write() as db:
            row = db.execute("SELECT * FROM emails WHERE dedupe_id = ?", (dedupe_id,)).fetchone()
            if row is None:
                email = Email(_new_id("em"), dedupe_id, to, subject, body, _now())
                db.execute(
                    'INSERT INTO emails (id, dedupe_id, "to", subject, body, created_at) '
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        email.id,
                        email.dedupe_id,
                        email.to,
                        email.subject,
                        email.body,
                        email.created_at,
                    ),
                )
                outcome: EmailOutcome = "created"
            else:
                email, outcome = _email(row), "replayed"
            _insert_request(db, received, _OUTCOME_STATUS[outcome], email_id=email.id)
        return outcome, email

    def charge_for_key(self, key: str) -> Charge | None:
        """Return the refund created with ``key``, if any."""
        rows = self._rows("SELECT * FROM charges WHERE idempotency_key = ?", key)
        return _charge(rows[0]) if rows else None

    def charges(self) -> list[Charge]:
        """Return every refund, oldest first."""
        return [_charge(r) for r in self._rows("SELECT * FROM charges ORDER BY rowid")]

    def emails(self) -> list[Email]:
        """Return every email sent, oldest first."""
        return [_email(r) for r in self._rows("SELECT * FROM emails ORDER BY rowid")]

    def entries(self) -> list[LedgerEntry]:
        """Return every request received, oldest first."""
        return [_entry(r) for r in self._rows("SELECT * FROM requests ORDER BY seq")]


def _insert_request(
    db: sqlite3.Connection,
    received: Received,
    status: int,
    *,
    created_charge: bool = False,
    charge_id: str | None = None,
    email_id: str | None = None,
) -> int:
    cursor = db.execute(
        "INSERT INTO requests (at, method, path, idempotency_key, body, status, "
        "created_charge, charge_id, email_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            _now(),
            received.method,
            received.path,
            received.idempotency_key,
            json.dumps(received.body, ensure_ascii=False),
            status,
            int(created_charge),
            charge_id,
            email_id,
        ),
    )
    return int(cursor.lastrowid or 0)


def _insert_charge(db: sqlite3.Connection, charge: Charge) -> None:
    db.execute(
        "INSERT INTO charges (id, idempotency_key, order_id, amount_cents, currency, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (
            charge.id,
            charge.idempotency_key,
            charge.order_id,
            charge.amount_cents,
            charge.currency,
            charge.created_at,
        ),
    )


def _charge(row: sqlite3.Row) -> Charge:
    return Charge(
        row["id"],
        row["idempotency_key"],
        row["order_id"],
        int(row["amount_cents"]),
        row["currency"],
        row["created_at"],
    )


def _email(row: sqlite3.Row) -> Email:
    return Email(
        row["id"], row["dedupe_id"], row["to"], row["subject"], row["body"], row["created_at"]
    )


def _entry(row: sqlite3.Row) -> LedgerEntry:
    return LedgerEntry(
        seq=int(row["seq"]),
        at=row["at"],
        method=row["method"],
        path=row["path"],
        idempotency_key=row["idempotency_key"],
        body=json.loads(row["body"]),
        status=int(row["status"]),
        created_charge=bool(row["created_charge"]),
        charge_id=row["charge_id"],
        email_id=row["email_id"],
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"
