"""Tests of the local Slack Web API (``devkit.sandbox.slack_api``), driven by the real
``slack_sdk.WebClient`` over loopback HTTP, and their helpers.

Every test starts a server on a free port and talks to it with ``WebClient(base_url=<url>/api/)``,
so the wire formats slack_sdk really uses (JSON bodies for chat.* and views.*, form bodies for
auth.test and conversations.open, query strings for users.info and chat.getPermalink) are the
ones exercised.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError

from devkit.sandbox.slack_api import RunningSlackApi

TS_RE = re.compile(r"^\d{10}\.\d{6}$")
EPOCH = 1_732_900_000.0


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = EPOCH) -> None:
        self.now = now

    def __call__(self) -> float:
        """Return the current fake time."""
        return self.now


def general(slack: RunningSlackApi) -> str:
    """Return the id of ``#general``."""
    return slack.workspace.resolve_channel("general").id


def modal(title: str = "Approve", **extra: Any) -> dict[str, Any]:
    """Return a minimal valid modal view."""
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": title},
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "Refund?"}}],
        **extra,
    }


def section(text: str) -> dict[str, Any]:
    """Return a section block with mrkdwn text."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def api_error(exc: pytest.ExceptionInfo[SlackApiError]) -> str:
    """Return the Slack error code a SlackApiError carries."""
    return str(exc.value.response["error"])
