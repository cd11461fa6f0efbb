"""What the dispatcher sends besides messages: a person's Home tab (``views.publish``) and
a run's thread status (``assistant.threads.setStatus``), both rendered when sent."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime import Actor, Approval, ApprovalStore, Run, Store
from agent_runtime.notices import Delivery
from bot.slack.delivery_errors import describe, is_rate_limited, is_token_refused, slack_error
from bot.slack.home import home_for
from bot.slack.run_status import thread_status

logger = logging.getLogger(__name__)

HOME_REFUSALS = frozenset(
    {"not_enabled", "invalid_arguments", "view_too_large", "user_not_found", "hash_conflict"}
)
"""``views.publish`` refusals no retry cures (the next opening publishes the tab afresh)."""


class HomeRefused(Exception):
    """Slack refused the Home tab for good (the tab is off, say): the notice ends."""


def publish_home(
    client: WebClient, approvals: ApprovalStore, runs: Store, data: dict[str, Any], now: datetime
) -> None:
    """Publish the Home tab of the person a home notice names, as the database stands."""
    actor = Actor.from_json(data["user"])
    view = home_for(approvals, runs, actor, now, str(data.get("note") or ""))
    try:
        client.views_publish(user_id=actor.user_id, view=view)
    except SlackApiError as exc:
        if slack_error(exc) in HOME_REFUSALS:
            raise HomeRefused(describe(exc)) from exc
        raise


def set_thread_status(client: WebClient, root: Delivery, run: Run, pending: list[Approval]) -> None:
    """Show under the run's thread what it waits for, or clear it.

    The status is a courtesy beside the root message's status line, which says the same:
    a refusal (the scope missing, say) is logged and dropped; only a 429 is retried.
    """
    try:
        client.assistant_threads_setStatus(
            channel_id=root.channel, thread_ts=root.ts, status=thread_status(run, pending)
        )
    except SlackApiError as exc:
        if is_rate_limited(exc) or is_token_refused(exc):
            raise
        logger.warning(
            "thread status not set", extra={"action": "thread_status", "error": describe(exc)}
        )
