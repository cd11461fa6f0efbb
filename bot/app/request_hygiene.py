"""Refuse malformed Slack requests at the WSGI level, before Bolt parses or verifies them.

Bolt turns a request into a ``BoltRequest`` (decoding and parsing its body) and checks its
signature with ``int()`` of the timestamp header; either raises on input no Slack request
has, and the caller would get a 500. This guard answers such requests with the 4xx they
deserve: 401 for missing or unusable signature headers (like any bad signature), 400 for
a body that does not parse, 413 for one too large, 415 for a content type Slack never sends.
JSON (a body, or a form's ``payload``) must also be within ``agent_runtime.json_limits``: no
NaN, duplicate key, lone surrogate or nesting deeper than 64 levels, which Slack never sends
and which would otherwise fail deep inside a listener (10,000 levels were a 500).
What a well-formed body says is left in the request's environ (``PARSED_BODY``): Bolt's
request takes it from there instead of parsing the body again.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from agent_runtime.exceptions import UnsafeJson
from agent_runtime.json_limits import strict_loads

logger = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

PARSED_BODY = "signoff.slack_body"
"""Where the guard leaves what a well-formed body says (see ``checked_body``), so that the
application behind it does not parse the body again."""
MAX_BODY_BYTES = 1024 * 1024
"""Far above any Slack payload (a full modal's state is tens of kilobytes)."""

FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
STATUS = {
    400: "400 Bad Request",
    401: "401 Unauthorized",
    411: "411 Length Required",
    413: "413 Content Too Large",
    415: "415 Unsupported Media Type",
}


class _Refused(Exception):
    """Why a request is refused, and with which HTTP status."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def guarded(application: WSGIApp) -> WSGIApp:
    """Wrap ``application`` so that only well-formed Slack requests reach it."""

    def guard(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            body, parsed = checked_body(environ)
        except _Refused as refusal:
            logger.warning(
                "malformed slack request refused",
                extra={"action": "refuse", "reason": refusal.reason},
            )
            start_response(STATUS[refusal.status], [("Content-Type", JSON)])
            return [json.dumps({"error": refusal.reason}).encode()]
        environ["wsgi.input"] = io.BytesIO(body)
        environ[PARSED_BODY] = parsed
        return application(environ, start_response)

    return guard


def checked_body(environ: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """Return the request's body, and what it says, once its headers and body are as Slack
    sends them: the JSON object of a JSON body or of a form's ``payload`` field, else the
    form's fields (what Bolt reads a body as)."""
    _check_signature_headers(environ)
    media_type = _media_type(environ)
    body = _read(environ)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(400, "the body is not UTF-8") from None
    if media_type == JSON:
        return body, _object(text, "the body")
    return body, _form(text)


def _check_signature_headers(environ: dict[str, Any]) -> None:
    stamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP", "")
    if not (stamp.isascii() and stamp.isdigit()):
        raise _Refused(401, "X-Slack-Request-Timestamp must be one whole number of seconds")
    if not environ.get("HTTP_X_SLACK_SIGNATURE"):
        raise _Refused(401, "X-Slack-Signature is missing")


def _media_type(environ: dict[str, Any]) -> str:
    media_type = str(environ.get("CONTENT_TYPE", "")).split(";")[0].strip().lower()
    if media_type not in (FORM, JSON):
        raise _Refused(415, f"the content type must be {FORM} or {JSON}")
    return media_type


def _read(environ: dict[str, Any]) -> bytes:
    try:
        length = int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        raise _Refused(411, "Content-Length is missing or not a number") from None
    if length > MAX_BODY_BYTES:
        raise _Refused(413, f"the body is over {MAX_BODY_BYTES} bytes")
    body: bytes = environ["wsgi.input"].read(length) if length > 0 else b""
    return body


def _form(text: str) -> dict[str, Any]:
    if text.startswith("{"):
        raise _Refused(415, f"a JSON body must be sent as {JSON}")
    try:
        fields = dict(
            parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text), errors="strict")
        )
    except ValueError:
        raise _Refused(400, "the form body is not valid URL encoding") from None
    if "payload" in fields:
        return _object(fields["payload"], "the payload field")
    return fields


def _object(text: str, what: str) -> dict[str, Any]:
    try:
        value = strict_loads(text, max_chars=MAX_BODY_BYTES)
    except UnsafeJson as exc:
        raise _Refused(400, f"{what} is refused: it holds {exc.problem}") from None
    except ValueError:
        raise _Refused(400, f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise _Refused(400, f"{what} is not a JSON object")
    return value
