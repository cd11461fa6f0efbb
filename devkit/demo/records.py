"""What the demo payment provider knows and records: fixture orders, refunds, emails, requests.

Plain immutable values; each ``to_json`` is the shape the provider's API shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

JsonObject = dict[str, Any]


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
    Order(
        "1042",
        "Dana Example",
        "dana@example.com",
        4999,
        "USD",
        "delivered",
        "Ceramic pour-over coffee set",
    ),
    Order("1043", "Lee Sample", "lee@example.com", 12900, "EUR", "shipped", "Merino wool blanket"),
    Order(
        "1044",
        "Sam Placeholder",
        "sam@example.org",
        2500,
        "USD",
        "processing",
        "Paperback: Durable Systems",
    ),
    Order("1045", "Robin Test", "robin@example.net", 89900, "GBP", "delivered", "Espresso machine"),
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
