"""A demo payment provider: a small local HTTP service that records every request it gets.

The demo agent's tools call it to look up orders, issue refunds and send emails. It creates
at most one refund ("charge") per ``Idempotency-Key`` and at most one email per
``dedupe_id``, and its ledger (a SQLite file in WAL mode, readable by other processes and
kept across restarts) lists every request received, rejected ones included, so anyone can
check that a crashed-and-resumed agent never charged twice.

Endpoints (every body is JSON; errors are ``{"error": {"type": ..., "message": ...}}``):

- ``GET /v1/orders/<id>``: a fixture order, or 404.
- ``POST /v1/refunds`` ``{order_id, amount_cents, currency?}`` with ``Idempotency-Key``:
  201 and the new refund; 200 and the same refund with ``Idempotent-Replayed: true`` for the
  same key and the same order, amount and currency; 409 for the same key with other values;
  400 without the key; 422 for more than the order's amount or another currency. The limit
  is per refund, not cumulative, so a second refund under a fresh key is created and shows
  up in the ledger as the double charge it is.
- ``GET /v1/refunds?idempotency_key=K``: the refund created with key K, or 404.
- ``POST /v1/emails`` ``{to, subject, body, dedupe_id}``: 201, then 200 with the email first
  sent (and ``Idempotent-Replayed: true``) for any later request with that ``dedupe_id``.
- ``GET /ledger``: every request received, oldest first. Reading the ledger is the one
  request that is not itself recorded.

Fault injection (off unless ``pause_after_charge_file`` is given): when a refund has been
committed, if ``PATH.arm`` exists the provider deletes it (one-shot: exactly one request
claims it), creates ``PATH`` and waits, *before writing the HTTP response*, until ``PATH``
is deleted (or the provider stops, or five minutes pass); then it answers as usual, ignoring
a client that has gone. Pausing before answering, rather than answering and then
signalling, is deliberate: while ``PATH`` exists the refund is durable here and the
worker is certainly still inside the tool call, so it cannot have journaled the result.
SIGKILLing it then is exactly "the provider has done it, the journal has not recorded it"
(what the worker would have received dies with it either way). Answering first would race:
the worker could commit its journal entry before the test's kill landed, and the test could
not know which case it had exercised.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import signal
import socketserver
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Final, Literal
from urllib.parse import parse_qs, urlsplit

DEFAULT_HOST: Final = "127.0.0.1"
REPLAYED_HEADER: Final = "Idempotent-Replayed"
MAX_BODY_BYTES: Final = 64 * 1024
MAX_KEY_LENGTH: Final = 255
PAUSE_LIMIT_S: Final = 300.0
_PAUSE_POLL_S: Final = 0.02
_SCHEMA_VERSION: Final = 1

JsonObject = dict[str, Any]
Log = Callable[[str], None]
ChargeOutcome = Literal["created", "replayed", "conflict"]
EmailOutcome = Literal["created", "replayed"]
_OUTCOME_STATUS: Final[Mapping[str, int]] = {"created": 201, "replayed": 200, "conflict": 409}


class ProviderError(Exception):
    """The demo provider cannot start or run."""


class PortInUse(ProviderError):
    """Another process already listens on the requested port."""


class LedgerError(ProviderError):
    """The ledger file cannot be opened or has an unknown layout."""


@dataclass(frozen=True, slots=True)
class Order:
    """A fixture order the provider knows about."""

    id: str
    customer_name: str
    customer_email: str
    amount_cents: int
    currency: str
    status: str
    item: str

    def to_json(self) -> JsonObject:
        """Return the order as the API shows it."""
        return {
            "id": self.id,
            "customer": {"name": self.customer_name, "email": self.customer_email},
            "amount_cents": self.amount_cents,
            "currency": self.currency,
            "status": self.status,
            "items": [{"name": self.item, "quantity": 1}],
        }


def _orders(*orders: Order) -> Mapping[str, Order]:
    return MappingProxyType({order.id: order for order in orders})


DEMO_ORDERS: Final[Mapping[str, Order]] = _orders(
    Order("1042", "Dana Example", "dana@example.com", 4999, "USD", "delivered",
          "Ceramic pour-over coffee set"),
    Order("1043", "Lee Sample", "lee@example.com", 12900, "EUR", "shipped",
          "Merino wool blanket"),
    Order("1044", "Sam Placeholder", "sam@example.org", 2500, "USD", "processing",
          "Paperback: Durable Systems"),
    Order("1045", "Robin Test", "robin@example.net", 89900, "GBP", "delivered",
          "Espresso machine"),
)
"""The fixture orders: immutable, so sharing them is safe."""


@dataclass(frozen=True, slots=True)
class Charge:
    """A refund the provider has issued: the money that moved."""

    id: str
    idempotency_key: str
    order_id: str
    amount_cents: int
    currency: str
    created_at: str

    def to_json(self) -> JsonObject:
        """Return the refund as the API shows it."""
        return {
            "id": self.id,
            "order_id": self.order_id,
            "amount_cents": self.amount_cents,
            "currency": self.currency,
            "status": "succeeded",
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class Email:
    """An email the provider has sent."""

    id: str
    dedupe_id: str
    to: str
    subject: str
    body: str
    created_at: str

    def to_json(self) -> JsonObject:
        """Return the email as the API shows it."""
        return {
            "id": self.id,
            "dedupe_id": self.dedupe_id,
            "to": self.to,
            "subject": self.subject,
            "body": self.body,
            "status": "sent",
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class Received:
    """A request as the ledger records it.

    ``idempotency_key`` is the ``Idempotency-Key`` header or, for an email sent without
    one, its ``dedupe_id``; ``body`` is the parsed JSON, the raw text if it is not JSON, or
    None if there was none.
    """

    method: str
    path: str
    idempotency_key: str | None
    body: Any


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One request the provider received and what it did about it."""

    seq: int
    at: str
    method: str
    path: str
    idempotency_key: str | None
    body: Any
    status: int
    created_charge: bool
    charge_id: str | None
    email_id: str | None

    def to_json(self) -> JsonObject:
        """Return the entry as ``GET /ledger`` shows it."""
        return {
            "seq": self.seq,
            "at": self.at,
            "method": self.method,
            "path": self.path,
            "idempotency_key": self.idempotency_key,
            "body": self.body,
            "status": self.status,
            "created_charge": self.created_charge,
            "charge_id": self.charge_id,
            "email_id": self.email_id,
        }


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
                db, received, _OUTCOME_STATUS[outcome], created_charge=outcome == "created",
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
                    (email.id, email.dedupe_id, email.to, email.subject, email.body,
                     email.created_at),
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
        (_now(), received.method, received.path, received.idempotency_key,
         json.dumps(received.body, ensure_ascii=False), status, int(created_charge),
         charge_id, email_id),
    )
    return int(cursor.lastrowid or 0)


def _insert_charge(db: sqlite3.Connection, charge: Charge) -> None:
    db.execute(
        "INSERT INTO charges (id, idempotency_key, order_id, amount_cents, currency, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (charge.id, charge.idempotency_key, charge.order_id, charge.amount_cents,
         charge.currency, charge.created_at),
    )


def _charge(row: sqlite3.Row) -> Charge:
    return Charge(row["id"], row["idempotency_key"], row["order_id"], int(row["amount_cents"]),
                  row["currency"], row["created_at"])


def _email(row: sqlite3.Row) -> Email:
    return Email(row["id"], row["dedupe_id"], row["to"], row["subject"], row["body"],
                 row["created_at"])


def _entry(row: sqlite3.Row) -> LedgerEntry:
    return LedgerEntry(
        seq=int(row["seq"]), at=row["at"], method=row["method"], path=row["path"],
        idempotency_key=row["idempotency_key"], body=json.loads(row["body"]),
        status=int(row["status"]), created_charge=bool(row["created_charge"]),
        charge_id=row["charge_id"], email_id=row["email_id"],
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


@dataclass(frozen=True, slots=True)
class Reply:
    """What the provider answers: status, JSON body, extra headers.

    ``recorded`` says the ledger already holds the request; ``created_charge`` names the
    refund this request created (the moment fault injection may pause).
    """

    status: int
    body: Any
    headers: tuple[tuple[str, str], ...] = ()
    recorded: bool = False
    created_charge: str | None = None


class _Rejection(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def error_body(kind: str, message: str) -> JsonObject:
    """Return the JSON body of an error response."""
    return {"error": {"type": kind, "message": message}}


class Provider:
    """The provider's behaviour, independent of HTTP plumbing: route, validate, record."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        orders: Mapping[str, Order] = DEMO_ORDERS,
        pause_after_charge_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.ledger = ledger
        self._orders = orders
        self._pause_file = None if pause_after_charge_file is None else Path(
            pause_after_charge_file)
        self._released = threading.Event()

    def handle(
        self, method: str, target: str, idempotency_key: str | None, raw: bytes | None
    ) -> Reply:
        """Answer one request and record it (``raw`` None: body too large or unreadable)."""
        parts = urlsplit(target)
        if parts.path == "/ledger":
            return self._ledger_reply(method)
        received = Received(method, target, idempotency_key, _body_for_ledger(raw))
        try:
            reply = self._route(method, parts.path, parse_qs(parts.query), received, raw)
        except _Rejection as exc:
            reply = Reply(exc.status, error_body(exc.kind, exc.message))
        if not reply.recorded:
            self.ledger.record(received, reply.status)
        return reply

    def pause_if_armed(self, charge_id: str) -> None:
        """Fault injection: hold this response while ``PATH`` exists, if ``PATH.arm`` did."""
        path = self._pause_file
        if path is None:
            return
        try:
            os.unlink(f"{path}.arm")
        except FileNotFoundError:
            return
        _write_atomically(path, json.dumps({"charge_id": charge_id, "pid": os.getpid()}))
        deadline = time.monotonic() + PAUSE_LIMIT_S
        while path.exists() and time.monotonic() < deadline:
            if self._released.wait(_PAUSE_POLL_S):
                return

    def release(self) -> None:
        """End any pause now and skip later ones (the provider is stopping)."""
        self._released.set()

    def _ledger_reply(self, method: str) -> Reply:
        if method != "GET":
            return Reply(405, error_body("method_not_allowed", f"{method} /ledger"))
        return Reply(200, [entry.to_json() for entry in self.ledger.entries()], recorded=True)

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        received: Received,
        raw: bytes | None,
    ) -> Reply:
        if raw is None:
            raise _Rejection(413, "invalid_request",
                             f"the body needs a Content-Length of at most {MAX_BODY_BYTES}")
        if (method, path) == ("POST", "/v1/refunds"):
            return self._create_refund(received, raw)
        if (method, path) == ("GET", "/v1/refunds"):
            return self._find_refund(query)
        if (method, path) == ("POST", "/v1/emails"):
            return self._send_email(received, raw)
        if method == "GET" and path.startswith("/v1/orders/"):
            return Reply(200, self._order(path.removeprefix("/v1/orders/")).to_json())
        if path in ("/v1/refunds", "/v1/emails") or path.startswith("/v1/orders/"):
            raise _Rejection(405, "method_not_allowed", f"{method} is not allowed on {path}")
        raise _Rejection(404, "not_found", f"no endpoint {path}")

    def _order(self, order_id: str) -> Order:
        order = self._orders.get(order_id)
        if order is None:
            raise _Rejection(404, "not_found", f"no order {order_id!r}")
        return order

    def _create_refund(self, received: Received, raw: bytes) -> Reply:
        key = _checked_key(received.idempotency_key, "the Idempotency-Key header")
        body = _json_object(raw)
        order = self._order(_order_id(body.get("order_id")))
        amount = _positive_int(body.get("amount_cents"), "amount_cents")
        currency = _currency(body.get("currency", order.currency))
        if currency != order.currency:
            raise _Rejection(422, "currency_mismatch",
                             f"order {order.id} was paid in {order.currency}, not {currency}")
        if amount > order.amount_cents:
            raise _Rejection(422, "amount_too_large",
                             f"amount_cents {amount} exceeds order {order.id}'s "
                             f"{order.amount_cents}")
        outcome, charge = self.ledger.create_charge(
            replace(received, idempotency_key=key), order.id, amount, currency)
        if outcome == "conflict":
            return Reply(409, error_body(
                "idempotency_conflict",
                f"Idempotency-Key {key!r} was used for a different refund ({charge.id})"),
                recorded=True)
        if outcome == "replayed":
            return Reply(200, charge.to_json(), ((REPLAYED_HEADER, "true"),), recorded=True)
        return Reply(201, charge.to_json(), recorded=True, created_charge=charge.id)

    def _find_refund(self, query: dict[str, list[str]]) -> Reply:
        keys = query.get("idempotency_key", [])
        if len(keys) != 1:
            raise _Rejection(400, "invalid_request",
                             "give exactly one idempotency_key query parameter")
        charge = self.ledger.charge_for_key(keys[0])
        if charge is None:
            raise _Rejection(404, "not_found", f"no refund with idempotency key {keys[0]!r}")
        return Reply(200, charge.to_json())

    def _send_email(self, received: Received, raw: bytes) -> Reply:
        body = _json_object(raw)
        to, subject, text = (_string(body.get(name), name) for name in ("to", "subject", "body"))
        if "@" not in to:
            raise _Rejection(400, "invalid_request", f"to {to!r} is not an email address")
        dedupe_id = _checked_key(body.get("dedupe_id"), "dedupe_id")
        keyed = replace(received, idempotency_key=received.idempotency_key or dedupe_id)
        outcome, email = self.ledger.create_email(keyed, to, subject, text, dedupe_id)
        if outcome == "replayed":
            return Reply(200, email.to_json(), ((REPLAYED_HEADER, "true"),), recorded=True)
        return Reply(201, email.to_json(), recorded=True)


def _body_for_ledger(raw: bytes | None) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _json_object(raw: bytes) -> JsonObject:
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        raise _Rejection(400, "invalid_request", "the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise _Rejection(400, "invalid_request", "the body must be a JSON object")
    return value


def _checked_key(value: object, name: str) -> str:
    if value is None:
        raise _Rejection(400, "invalid_request", f"{name} is required")
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_LENGTH:
        raise _Rejection(400, "invalid_request",
                         f"{name} must be a string of 1 to {MAX_KEY_LENGTH} characters")
    return value


def _order_id(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value.isdigit():
        return value
    raise _Rejection(400, "invalid_request", "order_id must be an order number")


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise _Rejection(400, "invalid_request", f"{name} must be a positive integer")


def _currency(value: object) -> str:
    if isinstance(value, str) and len(value) == 3 and value.isalpha():
        return value.upper()
    raise _Rejection(400, "invalid_request", "currency must be a three-letter code")


def _string(value: object, name: str) -> str:
    if isinstance(value, str):
        return value
    raise _Rejection(400, "invalid_request", f"{name} must be a string")


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f"{path.name}.partial")
    partial.write_text(text + "\n", encoding="utf-8")
    os.replace(partial, path)


class _Server(ThreadingHTTPServer):
    """Threading server that joins its request threads on close and skips the DNS lookup."""

    daemon_threads = False
    block_on_close = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], provider: Provider, log: Log | None) -> None:
        self.provider = provider
        self.log = log
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        """Bind without ``HTTPServer``'s reverse DNS lookup of the host."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = str(host), int(port)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10.0
    server_version = "SignoffDemoProvider/1"

    def do_GET(self) -> None:
        """Serve a GET."""
        self._serve()

    def do_POST(self) -> None:
        """Serve a POST."""
        self._serve()

    def do_PUT(self) -> None:
        """Answer 405 (recorded)."""
        self._serve()

    def do_PATCH(self) -> None:
        """Answer 405 (recorded)."""
        self._serve()

    def do_DELETE(self) -> None:
        """Answer 405 (recorded)."""
        self._serve()

    def _serve(self) -> None:
        provider = self.server.provider
        key = self.headers.get("Idempotency-Key")
        try:
            reply = provider.handle(self.command, self.path, key, self._read_body())
        except Exception as exc:
            reply = Reply(500, error_body("internal_error", f"{type(exc).__name__}: {exc}"))
        if self.server.log is not None:
            made = f" created {reply.created_charge}" if reply.created_charge else ""
            self.server.log(f"{self.command} {self.path} key={key or '-'} -> {reply.status}{made}")
        if reply.created_charge:
            provider.pause_if_armed(reply.created_charge)
        self._send(reply)

    def _read_body(self) -> bytes | None:
        header = self.headers.get("Content-Length")
        if not header:
            return b""
        try:
            length = int(header)
        except ValueError:
            return None
        if not 0 <= length <= MAX_BODY_BYTES:
            return None
        return self.rfile.read(length)

    def _send(self, reply: Reply) -> None:
        payload = json.dumps(reply.body, ensure_ascii=False).encode("utf-8")
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Stay quiet: ``_serve`` logs each request itself."""

    def log_message(self, format: str, *args: Any) -> None:
        """Send the server's own complaints (bad request lines, timeouts) to the log."""
        if self.server.log is not None:
            self.server.log(f"{self.address_string()} {format % args}")


class RunningProvider:
    """A provider serving in a background thread; ``stop()`` (or the ``with`` block) ends it."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"demo-provider-{server.server_port}", daemon=True,
        )
        self._stopped = False
        self._thread.start()

    @property
    def port(self) -> int:
        """Return the port it listens on."""
        return self._server.server_port

    @property
    def url(self) -> str:
        """Return its base URL, e.g. ``http://127.0.0.1:8765``."""
        return f"http://{self._server.server_name}:{self.port}"

    @property
    def ledger(self) -> Ledger:
        """Return the ledger it writes."""
        return self._server.provider.ledger

    def stop(self) -> None:
        """End pauses, stop accepting, wait for requests in flight, close the ledger."""
        if self._stopped:
            return
        self._stopped = True
        self._server.provider.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self.ledger.close()

    def __enter__(self) -> RunningProvider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_in_thread(
    ledger_path: str | os.PathLike[str],
    *,
    port: int = 0,
    host: str = DEFAULT_HOST,
    pause_after_charge_file: str | os.PathLike[str] | None = None,
    orders: Mapping[str, Order] = DEMO_ORDERS,
    log: Log | None = None,
) -> RunningProvider:
    """Start a provider in a background thread (port 0: any free port) and return it.

    Raises PortInUse if the port is taken and LedgerError if the ledger cannot be opened.
    """
    ledger = Ledger(ledger_path)
    provider = Provider(ledger, orders=orders, pause_after_charge_file=pause_after_charge_file)
    try:
        server = _Server((host, port), provider, log)
    except OSError as exc:
        ledger.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(f"port {port} on {host} is already in use "
                            "(is another demo provider running?)") from None
        raise ProviderError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return RunningProvider(server)


def serve(
    port: int,
    ledger_path: str | os.PathLike[str],
    *,
    host: str = DEFAULT_HOST,
    pause_after_charge_file: str | os.PathLike[str] | None = None,
    log: Log | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve until SIGTERM, Ctrl-C or ``stop`` is set, then stop cleanly.

    Signals are handled only when called from the main thread. ``log`` receives a line when
    the provider is listening and one per request.
    """
    if stop is None:
        stop = threading.Event()
    running = start_in_thread(ledger_path, port=port, host=host,
                              pause_after_charge_file=pause_after_charge_file, log=log)
    if log is not None:
        log(f"demo provider listening on {running.url} (ledger {running.ledger.path})")
    try:
        with _stop_on_signals(stop):
            while not stop.wait(0.2):
                pass
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    for signum in previous:
        signal.signal(signum, lambda *_: stop.set())
    try:
        yield
    finally:
        for signum, handler in previous.items():
            with suppress(TypeError, ValueError):
                signal.signal(signum, handler)
