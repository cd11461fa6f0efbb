"""Bolt middleware of the Slack app: Slack's retries acknowledged once, replays refused."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from slack_bolt import BoltResponse

from agent_runtime import Clock
from bot.slack.intake import CONTEXT_KEY, Intake, IntakeRecords
from bot.slack.reconnect import BEFORE_ACK

logger = logging.getLogger(__name__)


class ReplayGuard(IntakeRecords, Protocol):
    """Remembers signatures of handled requests, with the work acknowledged for them."""

    def first_time(self, signature: str, now: datetime, work: Any = None) -> bool:
        """Record ``signature`` (and ``work``); False if it was seen before."""
        ...


def drop_retries(request: Any, next: Callable[[], BoltResponse]) -> BoltResponse:
    """Acknowledge Slack's retries of events without handling them twice.

    A first delivery may say so too: Bolt's Socket Mode adapter turns an envelope's
    ``retry_attempt: 0`` into ``X-Slack-Retry-Num: 0``, which is not a retry.
    """
    if _retry_number(request.headers.get("x-slack-retry-num")) > 0:
        return BoltResponse(status=200, body="")
    return next()


def _retry_number(values: Any) -> int:
    """The retry number of a request's header values; 0 for none or an unreadable one."""
    value = values[0] if isinstance(values, list | tuple) and values else values
    try:
        return int(str(value or "0").strip())
    except ValueError:
        return 1  # a retry that does not say which one is still a retry


def refuse_replays(
    replays: ReplayGuard, clock: Clock, intake_of: Callable[[dict[str, Any], str], Intake | None]
) -> Callable[..., BoltResponse]:
    """Refuse a (validly signed) request whose exact signature was already handled; record,
    in the same write, the run a command will be acknowledged for (see ``bot.slack.intake``)."""

    def middleware(request: Any, next: Callable[[], BoltResponse]) -> BoltResponse:
        signature = (request.headers.get("x-slack-signature") or [""])[0]
        if not signature:
            return next()
        intake = intake_of(request.body, signature)
        work = None if intake is None else intake.to_json()
        if not BEFORE_ACK.call(lambda: replays.first_time(signature, clock.now(), work)):
            logger.warning("replayed request refused", extra={"action": "replay"})
            return BoltResponse(status=401, body='{"error": "replayed request"}')
        if intake is not None:
            request.context[CONTEXT_KEY] = intake
        return next()

    return middleware
