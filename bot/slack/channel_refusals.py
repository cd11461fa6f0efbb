"""When Slack refuses a run's channel for good: tell the requester, and end the run.

A run started from a channel the bot has not joined (or one that is gone or archived) has
a thread nobody can see: its approval cards could never be clicked there. The person who
typed the command is told at once through the command's ``response_url`` (which works
without channel membership) how to fix it, and the run is cancelled with its pending
approvals, rather than left waiting for decisions nobody was shown.
"""

from __future__ import annotations

import logging

from agent_runtime import Actor, Approvals, RunId, Runtime, SignoffError
from agent_runtime.notices import Notice
from bot.slack.notifier import slack_context
from bot.slack.respond import respond

logger = logging.getLogger(__name__)

CHANNEL_REFUSALS = frozenset({"not_in_channel", "channel_not_found", "is_archived"})
"""Slack's definitive refusals of a channel: every later post of the run would fail too."""

SIGNOFF = Actor(user_id="signoff", name="Signoff (the bot could not post in the channel)")

HOW_TO_FIX = {
    "not_in_channel": "I am not a member of this channel, so nobody could see its progress "
    "or approve its actions. Invite me with `/invite @Signoff` and run "
    "the command again.",
    "channel_not_found": "I cannot see this channel (a private channel I was not invited "
    "to, or one that was deleted). Invite me with `/invite @Signoff`, "
    "or start the run from another channel.",
    "is_archived": "This channel is archived, so I cannot post in it. Start the run from "
    "another channel.",
}


def cancel_message(run_id: str, error: str) -> str:
    """What the requester is told when the run's channel refused ``error``."""
    return f"Run `{run_id}` was cancelled: {HOW_TO_FIX[error]}"


class ChannelRefusals:
    """Ends a run whose channel Slack refused, telling its requester why and what to do."""

    def __init__(self, runtime: Runtime, approvals: Approvals) -> None:
        self._runtime = runtime
        self._approvals = approvals

    def refused(self, notice: Notice, error: str) -> None:
        """Handle Slack's refusal ``error`` of ``notice``, a post in its run's thread."""
        if notice.run_id is None or error not in CHANNEL_REFUSALS:
            return
        run_id = RunId(notice.run_id)
        try:
            self._runtime.cancel(run_id, by=SIGNOFF)
        except SignoffError:
            return  # the run had already ended (or was ended by an earlier refusal)
        where = slack_context(self._runtime.get(run_id)) or {}
        told = respond(where, cancel_message(run_id, error))
        logger.error(
            "run cancelled: slack refused its channel",
            extra={"action": "dispatch", "run_id": run_id, "error": error, "requester_told": told},
        )


__all__ = ["CHANNEL_REFUSALS", "ChannelRefusals", "cancel_message"]
