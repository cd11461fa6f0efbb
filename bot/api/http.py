"""The approvals API over WSGI: ``POST /v1/approvals`` and ``GET /v1/approvals/{id}``.

Every request carries ``Authorization: Bearer KEY``. Errors are JSON ``{"error": ...}``
with a 4xx status; a database outage is a 503 the client may retry.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from agent_runtime.exceptions import StoreUnavailable, UnsafeJson
from agent_runtime.json_limits import strict_loads
from bot.api.asks import read_ask
from bot.api.exceptions import ApiError, BadRequest, NotFound
from bot.api.service import ApiApprovals
from bot.api.views import view
from bot.app.request_hygiene import MAX_BODY_BYTES, WSGIApp

logger = logging.getLogger(__name__)

PREFIX = "/v1/"
COLLECTION = "/v1/approvals"
Reply = tuple[str, dict[str, Any]]


def api_app(api: ApiApprovals, fallback: WSGIApp) -> WSGIApp:
    """A WSGI app answering ``/v1/...`` and passing anything else to ``fallback``."""

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if not str(environ.get("PATH_INFO", "")).startswith(PREFIX):
            return fallback(environ, start_response)
        try:
            status, body = _route(api, environ)
        except ApiError as exc:
            status, body = exc.status, {"error": exc.message}
        except StoreUnavailable as exc:
            logger.warning("api request failed", extra={"action": "api", "reason": str(exc)})
            status, body = "503 Service Unavailable", {"error": "the database is unavailable"}
        return _json(start_response, status, body)

    return application


def _route(api: ApiApprovals, environ: dict[str, Any]) -> Reply:
    path, method = str(environ.get("PATH_INFO", "")), environ.get("REQUEST_METHOD", "GET")
    if path == COLLECTION and method == "POST":
        client = api.client(_bearer(environ))
        approval, created = api.create(client, read_ask(_body(environ)))
        return ("201 Created" if created else "200 OK"), view(approval)
    approval_id = path.removeprefix(COLLECTION + "/")
    if path.startswith(COLLECTION + "/") and "/" not in approval_id and method == "GET":
        client = api.client(_bearer(environ))
        return "200 OK", view(api.wait(client, approval_id, _wait(environ)))
    raise NotFound(f"no {method} {path}")


def _bearer(environ: dict[str, Any]) -> str | None:
    scheme, _, key = str(environ.get("HTTP_AUTHORIZATION", "")).partition(" ")
    return key.strip() if scheme.lower() == "bearer" else None


def _wait(environ: dict[str, Any]) -> float:
    values = parse_qs(str(environ.get("QUERY_STRING", ""))).get("wait", ["0"])
    try:
        seconds = float(values[0])
    except ValueError:
        raise BadRequest("'wait' is a number of seconds") from None
    if not 0 <= seconds < float("inf"):
        raise BadRequest("'wait' is a number of seconds")
    return seconds


def _body(environ: dict[str, Any]) -> Any:
    try:
        length = int(environ.get("CONTENT_LENGTH") or "0")
    except ValueError:
        raise BadRequest("Content-Length is not a number") from None
    if length > MAX_BODY_BYTES:
        raise BadRequest(f"the body is over {MAX_BODY_BYTES} bytes")
    raw = environ["wsgi.input"].read(length) if length > 0 else b""
    try:
        return strict_loads(raw.decode("utf-8"), max_chars=MAX_BODY_BYTES)
    except UnsafeJson as exc:
        raise BadRequest(f"the body holds {exc.problem}") from None
    except ValueError:
        raise BadRequest("the body is not JSON") from None


def _json(start_response: Callable[..., Any], status: str, body: dict[str, Any]) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    start_response(
        status,
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(data))),
            ("Cache-Control", "no-store"),
        ],
    )
    return [data]
