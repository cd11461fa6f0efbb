"""HTTP plumbing shared by the provider models: one JSON POST, one attempt.

Retrying is the model step's ``RetryPolicy``'s business (``Agent.model_retry``), so one
model step sends at most that many requests. A failure is a one-line ``ModelError`` that
never contains the API key, marked retryable for connection failures, timeouts, HTTP 408,
409, 429 and 5xx (Anthropic's 529 included), and carrying the pause a ``Retry-After``
header (in seconds) asks for, which the step's policy honours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import requests

from agent_runtime.exceptions import ModelError

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""4xx statuses worth retrying; every 5xx is retried too."""

_MAX_DETAIL = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpOptions:
    """Where a provider lives, how to authenticate, and how long to wait for an answer."""

    base_url: str
    api_key: str = field(default="", repr=False)
    timeout: timedelta = timedelta(seconds=120)

    def __post_init__(self) -> None:
        if not self.base_url:
            raise ValueError("base_url must not be empty")
        if self.timeout <= timedelta(0):
            raise ValueError("timeout must be positive")

    def url(self, path: str) -> str:
        """Join ``path`` to the base URL with exactly one slash."""
        return f"{self.base_url.rstrip('/')}/{path.lstrip('/')}"


def post_json(
    session: requests.Session,
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    options: HttpOptions,
    provider: str,
) -> dict[str, Any]:
    """POST ``body`` as JSON once and return the JSON object answered, or raise ModelError."""
    outcome = _attempt(session, url, body, headers, options, provider)
    if isinstance(outcome, ModelError):
        raise outcome
    return outcome


def _attempt(
    session: requests.Session,
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    options: HttpOptions,
    provider: str,
) -> dict[str, Any] | ModelError:
    """Make one request; return the JSON answer or the error."""
    try:
        response = session.post(
            url, json=dict(body), headers=dict(headers), timeout=options.timeout.total_seconds()
        )
    except requests.RequestException as exc:
        transient = isinstance(
            exc,
            requests.ConnectionError | requests.Timeout | requests.exceptions.ChunkedEncodingError,
        )
        detail = _clean(f"{type(exc).__name__}: {exc}", options.api_key)
        error = ModelError(f"{provider}: request failed: {detail}", retryable=transient)
        error.__cause__ = exc
        return error
    if not 200 <= response.status_code < 300:
        status = response.status_code
        retryable = status in RETRYABLE_STATUSES or status >= 500
        detail = _clean(_error_detail(response), options.api_key)
        return ModelError(
            f"{provider}: HTTP {status}: {detail}",
            status=status,
            retryable=retryable,
            retry_after=_retry_after(response) if retryable else None,
        )
    return _json_object(response, provider, options.api_key)


def _json_object(
    response: requests.Response, provider: str, api_key: str
) -> dict[str, Any] | ModelError:
    """Decode a successful response, which must be a JSON object without an ``error``."""
    status = response.status_code
    try:
        data = response.json()
    except ValueError:
        snippet = _clean(response.text, api_key)
        return ModelError(
            f"{provider}: HTTP {status} with a body that is not JSON: {snippet}", status=status
        )
    if not isinstance(data, dict):
        return ModelError(
            f"{provider}: HTTP {status} with JSON that is not an object", status=status
        )
    if data.get("error"):
        detail = _clean(_payload_detail(data) or "unknown error", api_key)
        return ModelError(f"{provider}: HTTP {status} carrying an error: {detail}", status=status)
    return data


def _error_detail(response: requests.Response) -> str:
    """Describe an error response from its JSON error payload, or from its raw text."""
    try:
        data = response.json()
    except ValueError:
        data = None
    described = _payload_detail(data) if isinstance(data, dict) else None
    return described or response.text or response.reason or "no detail"


def _payload_detail(data: dict[str, Any]) -> str | None:
    """Read ``{"error": {"type", "message"}}``, ``{"error": "..."}`` or ``{"message": ...}``."""
    error = data.get("error")
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code")
        message = error.get("message")
    elif isinstance(error, str):
        kind, message = None, error
    else:
        kind, message = data.get("type"), data.get("message")
    if not message:
        return str(kind) if kind else None
    return f"{kind}: {message}" if kind else str(message)


def _retry_after(response: requests.Response) -> timedelta | None:
    """Read a ``Retry-After`` header given in seconds; HTTP dates are ignored."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return timedelta(seconds=max(0.0, seconds))


def _clean(text: str, secret: str) -> str:
    """Make ``text`` one short line with ``secret`` masked."""
    if secret:
        text = text.replace(secret, "***")
    line = " ".join(text.split())
    return line if len(line) <= _MAX_DETAIL else line[: _MAX_DETAIL - 3] + "..."
