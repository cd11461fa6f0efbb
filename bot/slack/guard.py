"""No request from outside ends in HTTP 500: the last line of defence, and input limits.

Listeners validate what they use; whatever still escapes them (or a middleware) is answered
here as Slack expects for the request's kind, and the person who acted is told.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any

from slack_bolt import BoltResponse

from agent_runtime import StoreUnavailable
from bot.slack.respond import respond

logger = logging.getLogger(__name__)

MAX_ARGS_DEPTH = 32
"""How deeply edited arguments may nest (deeper JSON is refused before it is parsed)."""
APPROVAL_ID = re.compile(r"[0-9a-f]{24}")
UNAVAILABLE = (
    "Signoff could not reach its database, so nothing was recorded. Try again in a moment."
)
FAILED = "Something went wrong, so nothing was recorded. Try again."


def is_approval_id(text: str) -> bool:
    """Tell whether ``text`` has the form of an approval id (before any database lookup)."""
    return APPROVAL_ID.fullmatch(text) is not None


def too_deep(text: str, limit: int = MAX_ARGS_DEPTH) -> bool:
    """Tell whether the JSON ``text`` opens more than ``limit`` nested arrays or objects."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if escaped:
            escaped = False
        elif in_string:
            escaped = char == "\\"
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def guard_errors(
    error: Exception, body: dict[str, Any], response: BoltResponse | None
) -> BoltResponse | None:
    """Bolt's error handler: log, and answer (or tell the person) instead of failing.

    Malformed requests never get here: ``bot.app.request_hygiene`` refuses them before Bolt.
    """
    return _handle(error, body, response)


def _handle(
    error: Exception, body: dict[str, Any], response: BoltResponse | None
) -> BoltResponse | None:
    logger.error("request failed", exc_info=error, extra={"action": "request_error"})
    text = UNAVAILABLE if isinstance(error, StoreUnavailable) else FAILED
    if response is None or body.get("type") == "block_actions":
        # acknowledged already (or a click, whose answer Slack does not show): tell the person
        threading.Thread(
            target=respond, args=(body, f"Sorry: {text}"), daemon=True, name="signoff-respond"
        ).start()
        return None if response is None else BoltResponse(status=200, body="")
    return _answer(body, text)


def _answer(body: dict[str, Any], text: str) -> BoltResponse:
    """The acknowledgement that shows ``text`` to the person for this kind of request."""
    if body.get("type") == "view_submission":
        block = _first_input(body.get("view"))
        if block is not None:
            return _json({"response_action": "errors", "errors": {block: text}})
        return BoltResponse(status=200, body="")
    if body.get("command"):
        return _json({"response_type": "ephemeral", "text": f"Sorry: {text}"})
    return BoltResponse(status=200, body="")


def _first_input(view: Any) -> str | None:
    blocks = view.get("blocks") if isinstance(view, dict) else None
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and block.get("type") == "input" and block.get("block_id"):
            return str(block["block_id"])
    return None


def _json(answer: dict[str, Any]) -> BoltResponse:
    return BoltResponse(
        status=200,
        body=json.dumps(answer),
        headers={"content-type": "application/json;charset=utf-8"},
    )


__all__ = ["MAX_ARGS_DEPTH", "guard_errors", "is_approval_id", "too_deep"]
