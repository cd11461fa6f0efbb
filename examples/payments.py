"""Stands in for a payment provider in the examples: it keeps every refund it made."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Payments:
    """A payment provider that records refunds instead of moving money."""

    refunds: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def refund(self, order_id: str, amount_cents: int) -> dict[str, Any]:
        """Refund ``amount_cents`` of order ``order_id``; return the receipt."""
        receipt = {"refunded": order_id, "amount_cents": amount_cents}
        with self._lock:
            self.refunds.append(receipt)
        return receipt
