"""How the dispatcher reads a failed Slack call: transient, back-pressure, or a refusal.

Transient failures (Slack unreachable or slow, 5xx and HTML error pages, Slack's own
``fatal_error``/``internal_error``/…) are retried for as long as they last; a 429 is
back-pressure, retried after its ``Retry-After``; only Slack's definitive refusals end a
notice.
"""

from __future__ import annotations

import http.client
from datetime import timedelta
from urllib.error import URLError

from slack_sdk.errors import SlackApiError

TRANSPORT_ERRORS: tuple[type[Exception], ...] = (URLError, OSError, http.client.HTTPException)
"""What ``slack_sdk``'s urllib client raises when Slack cannot be reached or stops answering."""

TRANSIENT_ERRORS = frozenset(
    {
        "ratelimited",
        "fatal_error",
        "internal_error",
        "service_unavailable",
        "request_timeout",
    }
)
"""Slack error codes that say "not now" rather than "never"."""

PERMANENT_ERRORS = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "user_not_found",
        "user_not_visible",
        "cannot_dm_bot",
        "invalid_blocks",
        "msg_too_long",
        "no_text",
        "message_not_found",
        "cant_update_message",
        "invalid_metadata_format",
        "invalid_metadata_schema",
        "metadata_too_large",
    }
)
"""Slack errors that no retry will cure for this notice. Token and scope errors are not
among them: they hit every notice alike and are cured by fixing the app's configuration,
so those notices wait, with backoff."""

TOKEN_ERRORS = frozenset(
    {
        "not_authed",
        "invalid_auth",
        "token_revoked",
        "token_expired",
        "account_inactive",
    }
)
"""Slack refusing the bot token itself: every call fails alike until an operator fixes it."""

DEFAULT_RETRY_AFTER = timedelta(seconds=1)


def slack_error(exc: SlackApiError) -> str | None:
    """Return Slack's error code of a refused call (None for a body that was not Slack's)."""
    data = exc.response.data if exc.response is not None else None
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, str) else None


def is_rate_limited(exc: SlackApiError) -> bool:
    """Tell whether Slack asked us to slow down (HTTP 429 or ``ratelimited``)."""
    return exc.response.status_code == 429 or slack_error(exc) == "ratelimited"


def is_permanent(exc: SlackApiError) -> bool:
    """Tell whether Slack refused the call for good."""
    return slack_error(exc) in PERMANENT_ERRORS


def is_token_refused(exc: SlackApiError) -> bool:
    """Tell whether Slack refused the bot token (revoked, invalid, deactivated)."""
    return slack_error(exc) in TOKEN_ERRORS


def is_transient(exc: SlackApiError) -> bool:
    """Tell whether the call may have failed on Slack's side: 5xx, HTML pages, "not now" codes.

    Such a call may also have done its work before failing.
    """
    error = slack_error(exc)
    return (
        exc.response.status_code >= 500
        or error in TRANSIENT_ERRORS
        or error is None
        or error.startswith("Received a response in a non-JSON format")
    )


def retry_after(exc: SlackApiError) -> timedelta:
    """Return how long a 429 asks us to wait (its ``Retry-After`` header, any case)."""
    headers = exc.response.headers or {}
    raw = next((str(v) for k, v in headers.items() if k.lower() == "retry-after"), None)
    try:
        seconds = float(raw) if raw is not None else None
    except ValueError:
        seconds = None
    if seconds is None or seconds <= 0:
        return DEFAULT_RETRY_AFTER
    return timedelta(seconds=seconds)


def never_reached_slack(exc: BaseException) -> bool:
    """Tell whether a transport error happened before Slack could see the request."""
    reason = exc.reason if isinstance(exc, URLError) else exc
    return isinstance(reason, ConnectionRefusedError)


def describe(exc: BaseException) -> str:
    """A short, stable description of a failed call for ``last_error``."""
    if isinstance(exc, SlackApiError):
        error = slack_error(exc)
        return f"slack: {error or 'HTTP ' + str(exc.response.status_code)}"[:500]
    reason = exc.reason if isinstance(exc, URLError) else exc
    return f"unreachable: {type(reason).__name__}: {reason}"[:500]


def backoff(attempts: int, cap: timedelta) -> timedelta:
    """Exponential backoff from half a second, doubling per attempt, never above ``cap``."""
    return min(timedelta(seconds=0.5 * 2 ** min(max(0, attempts - 1), 30)), cap)
