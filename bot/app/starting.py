"""Slack's requests to a process that has not reached its database yet.

Nothing can be recorded, so nothing is. A request whose signature does not verify is
refused with 401, as Bolt refuses it. A verified one is told that Signoff is starting, in the
way Slack shows best:

- a slash command: 200 with an ephemeral text (Slack shows the ack's text to whoever typed it;
  any other status shows them an error code);
- a click, a shortcut: 200 (Slack ignores that answer's body), and the text through the
  request's ``response_url``;
- a modal submission: the text as the error of the modal's first input, which keeps the modal
  open with what was typed in it;
- an Events API event: 503, so that Slack delivers it again later (it retries three times,
  the last about five minutes on); ``url_verification`` and ``ssl_check`` are answered.

Anything else (the install pages, the approvals API) is answered 503 with ``Retry-After``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from slack_sdk.signature import SignatureVerifier

from bot.app.request_hygiene import JSON, WSGIApp, guarded
from bot.ops.http import reply
from bot.slack.respond import respond

logger = logging.getLogger(__name__)

STARTING_TEXT = "Signoff is starting; try again in a moment."
RETRY_AFTER_S = 5
UNAVAILABLE = "503 Service Unavailable"
EVENTS_PATH = "/slack/events"


def starting_slack(signing_secret: str) -> WSGIApp:
    """A WSGI app answering Slack (and anything else) while the process starts."""
    verifier = SignatureVerifier(signing_secret)

    def verified(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        body: bytes = environ["wsgi.input"].read()
        stamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP")
        if not verifier.is_valid(body, stamp, environ.get("HTTP_X_SLACK_SIGNATURE")):
            logger.warning("slack request refused: bad signature", extra={"action": "refuse"})
            return reply(start_response, "401 Unauthorized", JSON, b'{"error":"invalid request"}')
        return _answer(body.decode("utf-8"), environ, start_response)

    events = guarded(verified)

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO", "") == EVENTS_PATH:
            return events(environ, start_response)
        return _unavailable(start_response)

    return application


def _answer(
    raw: str, environ: dict[str, Any], start_response: Callable[..., Any]
) -> Iterable[bytes]:
    if str(environ.get("CONTENT_TYPE", "")).lower().startswith(JSON):
        event = json.loads(raw)
        if event.get("type") == "url_verification":
            return _json(start_response, {"challenge": event.get("challenge")})
        return _unavailable(start_response)
    fields = dict(parse_qsl(raw, keep_blank_values=True))
    if "payload" in fields:
        return _interaction(json.loads(fields["payload"]), start_response)
    if "command" in fields:
        logger.info("slash command answered while starting", extra={"action": "starting"})
        return _json(start_response, {"response_type": "ephemeral", "text": STARTING_TEXT})
    if "ssl_check" in fields:
        return _json(start_response, {})
    return _unavailable(start_response)


def _interaction(payload: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    kind = payload.get("type")
    logger.info("interaction answered while starting", extra={"action": "starting", "kind": kind})
    if kind == "view_submission":
        block = _first_input(payload)
        if block is None:
            return _unavailable(start_response)
        errors = {block: STARTING_TEXT}
        return _json(start_response, {"response_action": "errors", "errors": errors})
    if kind == "block_suggestion":
        return _json(start_response, {"options": []})
    if kind != "view_closed":
        threading.Thread(
            target=respond, args=(payload, STARTING_TEXT), name="signoff-starting", daemon=True
        ).start()
    return reply(start_response, "200 OK", "text/plain", b"")


def _first_input(payload: dict[str, Any]) -> str | None:
    view = payload.get("view")
    state = view.get("state") if isinstance(view, dict) else None
    values = state.get("values") if isinstance(state, dict) else None
    return next(iter(values), None) if isinstance(values, dict) else None


def _json(start_response: Callable[..., Any], body: dict[str, Any]) -> Iterable[bytes]:
    return reply(start_response, "200 OK", JSON, json.dumps(body).encode())


def _unavailable(start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = json.dumps({"error": STARTING_TEXT}).encode()
    return reply(start_response, UNAVAILABLE, JSON, body, (("Retry-After", str(RETRY_AFTER_S)),))
