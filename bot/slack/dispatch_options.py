"""The outbox dispatcher's options, and the Slack client it sends with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.pacing import Pace


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchOptions:
    """How long a claim lasts, how far backoff grows, how many notices one round claims.

    Slack calls time out at a quarter of the claim, so a call in flight always ends
    (answered or failed) well before anyone else may claim its notice. A round claims its
    batch for that quarter only (``pick_up``), and each notice for the whole claim as its
    send begins: a dispatcher that dies with a batch claimed holds the notices it had not
    begun for a quarter of the claim, not all of it.
    """

    claim_for: timedelta = timedelta(seconds=60)
    backoff_cap: timedelta = timedelta(minutes=5)
    batch: int = 10
    pace: Pace = field(default_factory=Pace)
    on_refused: Callable[[str, SlackApiError], object] | None = None
    """Told of each Slack call refused, with its method (metrics count them)."""
    thread_status: bool = False
    """Also show what a waiting run waits for as its thread's status (Slack's AI-app
    surface); the root message's status line says it either way."""
    give_way: Callable[[], object] | None = None
    """Called before each notice is delivered: in a process that also executes runs, it
    waits (briefly) while its worker resumes runs (``agent_runtime.resume_first``), which a
    notice can always wait for."""

    @property
    def call_timeout(self) -> float:
        """Seconds one Slack call may take."""
        return self.claim_for.total_seconds() / 4

    @property
    def pick_up(self) -> timedelta:
        """How long a round's claim holds a notice whose send has not begun. Another
        dispatcher that takes one over meanwhile makes this one's begin refused (the claim
        is fenced), so a slow round loses notices to others, never sends one twice."""
        return self.claim_for / 4


def sending_client(client: WebClient, options: DispatchOptions) -> WebClient:
    """The dispatcher's own client: no automatic retries (a retried post could land twice)
    and a timeout well inside a claim."""
    return WebClient(
        token=client.token,
        base_url=client.base_url,
        retry_handlers=[],
        timeout=max(1, int(options.call_timeout)),
        logger=client.logger,
    )


__all__ = ["DispatchOptions", "Pace", "sending_client"]
