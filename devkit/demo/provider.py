"""A demo payment provider: a small local HTTP service that records every request it gets.

The demo agent's tools call it to look up orders, issue refunds and send emails. It creates
at most one refund ("charge") per ``Idempotency-Key`` and at most one email per
``dedupe_id``, and its ledger (a SQLite file in WAL mode, readable by other processes and
kept across restarts) lists every request received, rejected ones included, so anyone can
check that a crashed-and-resumed agent never charged twice.

Endpoints (every body is JSON; errors are ``{"error": {"type": ..., "message": ...}}``):

- ``GET /v1/orders/<id>``: a fixture order, or 404.
- ``PATCH /v1/orders/<id>`` ``{amount_cents?, currency?, status?, customer_name?}``: 200 and
  the order changed (in memory, until the provider stops): how a demo or a test makes an
  order change between a refund's approval and its execution.
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

import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from devkit.demo.ledger import Ledger
from devkit.demo.records import DEMO_ORDERS, JsonObject, Order, Received

REPLAYED_HEADER: Final = "Idempotent-Replayed"
MAX_BODY_BYTES: Final = 64 * 1024
MAX_KEY_LENGTH: Final = 255
PAUSE_LIMIT_S: Final = 300.0
_PAUSE_POLL_S: Final = 0.02
ORDER_CHANGES: Final = frozenset({"amount_cents", "currency", "status", "customer_name"})
"""What ``PATCH /v1/orders/<id>`` may change of an order."""


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
        self._orders = dict(orders)
        self._orders_lock = threading.Lock()
        self._pause_file = (
            None if pause_after_charge_file is None else Path(pause_after_charge_file)
        )
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
            raise _Rejection(
                413,
                "invalid_request",
                f"the body needs a Content-Length of at most {MAX_BODY_BYTES}",
            )
        if (method, path) == ("POST", "/v1/refunds"):
            return self._create_refund(received, raw)
        if (method, path) == ("GET", "/v1/refunds"):
            return self._find_refund(query)
        if (method, path) == ("POST", "/v1/emails"):
            return self._send_email(received, raw)
        if method == "GET" and path.startswith("/v1/orders/"):
            return Reply(200, self._order(path.removeprefix("/v1/orders/")).to_json())
        if method == "PATCH" and path.startswith("/v1/orders/"):
            return self._change_order(path.removeprefix("/v1/orders/"), raw)
        if path in ("/v1/refunds", "/v1/emails") or path.startswith("/v1/orders/"):
            raise _Rejection(405, "method_not_allowed", f"{method} is not allowed on {path}")
        raise _Rejection(404, "not_found", f"no endpoint {path}")

    def _order(self, order_id: str) -> Order:
        order = self._orders.get(order_id)
        if order is None:
            raise _Rejection(404, "not_found", f"no order {order_id!r}")
        return order

    def _change_order(self, order_id: str, raw: bytes) -> Reply:
        body = _json_object(raw)
        unknown = set(body) - ORDER_CHANGES
        if unknown:
            raise _Rejection(400, "invalid_request", f"cannot change {sorted(unknown)}")
        changes: dict[str, Any] = {}
        if "amount_cents" in body:
            changes["amount_cents"] = _positive_int(body["amount_cents"], "amount_cents")
        if "currency" in body:
            changes["currency"] = _currency(body["currency"])
        for name in ("status", "customer_name"):
            if name in body:
                changes[name] = _string(body[name], name)
        with self._orders_lock:
            order = replace(self._order(order_id), **changes)
            self._orders[order.id] = order
        return Reply(200, order.to_json())

    def _create_refund(self, received: Received, raw: bytes) -> Reply:
        key = _checked_key(received.idempotency_key, "the Idempotency-Key header")
        body = _json_object(raw)
        order = self._order(_order_id(body.get("order_id")))
        amount = _positive_int(body.get("amount_cents"), "amount_cents")
        currency = _currency(body.get("currency", order.currency))
        if currency != order.currency:
            raise _Rejection(
                422,
                "currency_mismatch",
                f"order {order.id} was paid in {order.currency}, not {currency}",
            )
        if amount > order.amount_cents:
            raise _Rejection(
                422,
                "amount_too_large",
                f"amount_cents {amount} exceeds order {order.id}'s {order.amount_cents}",
            )
        outcome, charge = self.ledger.create_charge(
            replace(received, idempotency_key=key), order.id, amount, currency
        )
        if outcome == "conflict":
            return Reply(
                409,
                error_body(
                    "idempotency_conflict",
                    f"Idempotency-Key {key!r} was used for a different refund ({charge.id})",
                ),
                recorded=True,
            )
        if outcome == "replayed":
            return Reply(200, charge.to_json(), ((REPLAYED_HEADER, "true"),), recorded=True)
        return Reply(201, charge.to_json(), recorded=True, created_charge=charge.id)

    def _find_refund(self, query: dict[str, list[str]]) -> Reply:
        keys = query.get("idempotency_key", [])
        if len(keys) != 1:
            raise _Rejection(
                400, "invalid_request", "give exactly one idempotency_key query parameter"
            )
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
        raise _Rejection(
            400, "invalid_request", f"{name} must be a string of 1 to {MAX_KEY_LENGTH} characters"
        )
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
