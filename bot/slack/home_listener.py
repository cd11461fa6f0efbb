"""The Home tab's listener, and its refresh for the person who decided from it."""

from __future__ import annotations

from typing import Any

from agent_runtime import Actor, Clock
from agent_runtime.notices import Outbox
from bot.slack.home import home_notice


class HomeListener:
    """Queues a publish of the person's Home tab; the dispatcher renders and sends it."""

    def __init__(self, outbox: Outbox, clock: Clock) -> None:
        self._outbox = outbox
        self._clock = clock

    def opened(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """``app_home_opened``: publish the tab of the person who opened it (not for the
        Messages tab, which the event also reports)."""
        if event.get("tab") != "home" or not event.get("user"):
            return
        actor = Actor(
            user_id=str(event["user"]),
            team_id=str(body.get("team_id") or ""),
            enterprise_id=str(body.get("enterprise_id") or ""),
        )
        self._queue(actor, f"opened:{event.get('event_ts') or body.get('event_id')}")

    def refresh(self, body: dict[str, Any], actor: Actor, note: str = "") -> None:
        """Publish ``actor``'s tab again after their click or submission ``body``, with
        ``note`` on top; the first refresh queued for one request is the one sent."""
        self._queue(actor, f"after:{body.get('trigger_id') or self._clock.now().isoformat()}", note)

    def _queue(self, actor: Actor, key: str, note: str = "") -> None:
        where = f"{actor.enterprise_id}:{actor.team_id}:{actor.user_id}"
        self._outbox.enqueue([home_notice(actor, f"{where}:{key}", note)], self._clock.now())
