"""The Home tab's listener, and its refresh for the person who decided from it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from agent_runtime import Actor, Clock
from agent_runtime.notices import Notice, Outbox
from bot.slack.home import home_notice


class HomeTabs(Protocol):
    """Who has opened their Home tab: the people whose tab later changes re-publish."""

    def opened(self, actor: Actor, publish: Sequence[Notice], now: datetime) -> None:
        """Record that ``actor`` opened their Home tab, and queue ``publish`` with it."""
        ...


class HomeListener:
    """Queues a publish of the person's Home tab; the dispatcher renders and sends it."""

    def __init__(self, tabs: HomeTabs, outbox: Outbox, clock: Clock) -> None:
        self._tabs = tabs
        self._outbox = outbox
        self._clock = clock

    def opened(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """``app_home_opened``: remember that the person opened their tab and publish it (not
        for the Messages tab, which the event also reports)."""
        if event.get("tab") != "home" or not event.get("user"):
            return
        actor = Actor(
            user_id=str(event["user"]),
            team_id=str(body.get("team_id") or ""),
            enterprise_id=str(body.get("enterprise_id") or ""),
        )
        key = f"opened:{event.get('event_ts') or body.get('event_id')}"
        self._tabs.opened(actor, [self._notice(actor, key)], self._clock.now())

    def refresh(self, body: dict[str, Any], actor: Actor, note: str = "") -> None:
        """Publish ``actor``'s tab again after their click or submission ``body``, with
        ``note`` on top; the first refresh queued for one request is the one sent."""
        key = f"after:{body.get('trigger_id') or self._clock.now().isoformat()}"
        self._outbox.enqueue([self._notice(actor, key, note)], self._clock.now())

    @staticmethod
    def _notice(actor: Actor, key: str, note: str = "") -> Notice:
        where = f"{actor.enterprise_id}:{actor.team_id}:{actor.user_id}"
        return home_notice(actor, f"{where}:{key}", note)
