"""How sending one notice can end short of a delivery, as the dispatcher tells them apart:
wait for an earlier message, give up, stand back for another dispatcher, retry, or hold."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agent_runtime.notices import Delivery


class NotReady(Exception):
    """The message this notice depends on (its thread root, or the card to update) is not out."""


class Undeliverable(Exception):
    """The message this notice depends on was given up: this one can never be delivered."""


class LostClaim(Exception):
    """Another dispatcher has claimed the notice since: this one must not call Slack for it."""


class IncompleteAnswer(Exception):
    """Slack answered ``ok`` without saying where the message is: not a delivery."""


class Held(Exception):
    """The call's lane is held back (a 429, or Slack unreachable) until ``until``."""

    def __init__(self, until: datetime, reason: str) -> None:
        super().__init__(reason)
        self.until = until
        self.reason = reason


def delivery_of(answer: Any) -> Delivery:
    """Where ``chat.postMessage`` says the message is; an answer without it is no delivery."""
    channel = answer.get("channel") if isinstance(answer, dict) else None
    ts = answer.get("ts") if isinstance(answer, dict) else None
    if not (isinstance(channel, str) and channel and isinstance(ts, str) and ts):
        raise IncompleteAnswer("slack: ok without channel and ts")
    return Delivery(channel=channel, ts=ts)


__all__ = ["Held", "IncompleteAnswer", "LostClaim", "NotReady", "Undeliverable", "delivery_of"]
