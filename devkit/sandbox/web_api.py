"""Slack's Web API conventions over a workspace, independent of any transport.

Bearer-token auth, ``{"ok": ...}`` bodies, Slack's error codes, HTTP 429 with ``Retry-After``
for injected rate limits; request decoding (query string, form, multipart or JSON bodies).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qsl

from bot.slack.scopes import BOT_SCOPES
from devkit.sandbox.history import conversations_history, conversations_replies
from devkit.sandbox.records import Fault, JsonObject, WorkspaceError
from devkit.sandbox.workspace import Workspace

log = logging.getLogger(__name__)

DEFAULT_TOKEN = "xoxb-test"  # noqa: S105 - the sandbox's well-known fake bot token
APPS_CONNECTIONS_OPEN = "apps.connections.open"


HTML_ERROR_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Server Error | Slack</title></head>
<body><h1>Server Error</h1><p>There is a problem connecting to our servers.</p></body></html>
"""
"""The kind of page Slack's edge serves instead of JSON when it is down."""


@dataclass(frozen=True)
class ApiResponse:
    """An answer: HTTP status, JSON body and extra headers (``Retry-After`` on a 429).

    ``html``, when set, is sent instead of the JSON body (as ``text/html``); ``dropped``
    means the connection is closed with no answer at all.
    """

    status: int
    body: JsonObject
    headers: dict[str, str] = field(default_factory=dict)
    html: str | None = None
    dropped: bool = False


def parse_request(content_type: str | None, body: bytes, query: str = "") -> JsonObject:
    """Decode a request's arguments: query string, then a form, multipart or JSON body.

    Raises WorkspaceError ``invalid_json``, ``invalid_form_data`` or ``invalid_post_type``.
    """
    params: JsonObject = dict(parse_qsl(query, keep_blank_values=True))
    if not body:
        return params
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "application/json":
        try:
            decoded = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise WorkspaceError("invalid_json") from None
        if not isinstance(decoded, dict):
            raise WorkspaceError("invalid_json")
        params.update(decoded)
    elif media in ("application/x-www-form-urlencoded", "text/plain", ""):
        try:
            params.update(
                parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
            )
        except UnicodeDecodeError:
            raise WorkspaceError("invalid_form_data") from None
    elif media == "multipart/form-data":
        params.update(_parse_multipart(content_type or "", body))
    else:
        raise WorkspaceError("invalid_post_type")
    return params


def _parse_multipart(content_type: str, body: bytes) -> JsonObject:
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise WorkspaceError("invalid_form_data")
    fields: JsonObject = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(payload, bytes):
            continue
        if part.get_filename() is None:
            fields[name] = payload.decode("utf-8", errors="replace")
        else:
            fields[name] = payload
    return fields


def bearer_token(authorization: str | None) -> str | None:
    """Return the token of an ``Authorization: Bearer <token>`` header, if there is one."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _text(params: Mapping[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is None or isinstance(value, bool):
        return None if value is None else ("true" if value else "false")
    if isinstance(value, str | int | float):
        return str(value)
    raise WorkspaceError("invalid_arguments", [f"[ERROR] must be a string [json-pointer:/{name}]"])


def _flag(params: Mapping[str, Any], name: str) -> bool:
    value = params.get(name)
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def _json_arg(params: Mapping[str, Any], name: str, format_error: str) -> Any:
    value = params.get(name)
    if isinstance(value, str | bytes):
        try:
            return json.loads(value)
        except ValueError:
            raise WorkspaceError(format_error) from None
    return value


def _blocks_arg(params: Mapping[str, Any]) -> list[JsonObject] | None:
    blocks = _json_arg(params, "blocks", "invalid_blocks_format")
    if blocks is not None and not isinstance(blocks, list):
        raise WorkspaceError("invalid_blocks_format")
    return cast("list[JsonObject] | None", blocks)


def _metadata_arg(params: Mapping[str, Any]) -> JsonObject | None:
    """Message metadata as Slack takes it: ``event_type`` and an ``event_payload`` object."""
    metadata = _json_arg(params, "metadata", "invalid_metadata_format")
    if metadata is None:
        return None
    if (
        not isinstance(metadata, dict)
        or not isinstance(metadata.get("event_type"), str)
        or not metadata["event_type"]
        or not isinstance(metadata.get("event_payload"), dict)
    ):
        raise WorkspaceError("invalid_metadata_format")
    return {"event_type": metadata["event_type"], "event_payload": metadata["event_payload"]}


def _view_arg(params: Mapping[str, Any]) -> JsonObject:
    view = _json_arg(params, "view", "invalid_arguments")
    if view is None:
        raise WorkspaceError("invalid_arguments", ["[ERROR] missing required field: view"])
    if not isinstance(view, dict):
        raise WorkspaceError(
            "invalid_arguments", ["[ERROR] must be an object [json-pointer:/view]"]
        )
    return view


def _required(params: Mapping[str, Any], name: str, error: str) -> str:
    value = _text(params, name)
    if not value:
        raise WorkspaceError(error)
    return value


Handler = Callable[[Mapping[str, Any]], JsonObject]


class SlackWebApi:
    """Slack's Web API over a workspace: auth, dispatch, faults, the call log.

    ``handle()`` takes decoded arguments; ``handle_http()`` takes the raw request. Neither
    raises: every outcome is an ``ApiResponse`` and a logged ``ApiCall``.
    """

    def __init__(
        self,
        workspace: Workspace,
        *,
        tokens: Iterable[str] = (DEFAULT_TOKEN,),
        scopes: Iterable[str] = BOT_SCOPES,
    ) -> None:
        self.workspace = workspace
        self.tokens = frozenset(tokens)
        self.scopes = tuple(scopes)
        """The scopes the token was granted: Slack names them in ``x-oauth-scopes``."""
        self._app_tokens: frozenset[str] = frozenset()
        self._socket_urls: Callable[[], str] | None = None
        self._handlers: dict[str, Handler] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.getPermalink": self._chat_get_permalink,
            "conversations.open": self._conversations_open,
            "conversations.info": self._conversations_info,
            "conversations.history": lambda p: conversations_history(self.workspace, p),
            "conversations.replies": lambda p: conversations_replies(self.workspace, p),
            "users.info": self._users_info,
            "views.open": self._views_open,
            "views.update": self._views_update,
            "views.push": self._views_push,
            "views.publish": self._views_publish,
            "assistant.threads.setStatus": self._set_thread_status,
        }

    def enable_socket_mode(self, app_token: str, new_url: Callable[[], str]) -> None:
        """Answer ``apps.connections.open`` for ``app_token`` (an ``xapp-`` token) with
        ``new_url()``, the one-time WebSocket URL of a Socket Mode endpoint."""
        self._app_tokens = self._app_tokens | {app_token}
        self._socket_urls = new_url

    @property
    def methods(self) -> tuple[str, ...]:
        """Return the API methods served."""
        return tuple(self._handlers)

    def handle_http(
        self,
        method: str,
        *,
        content_type: str | None,
        body: bytes,
        query: str = "",
        authorization: str | None = None,
    ) -> ApiResponse:
        """Answer a raw HTTP request for ``/api/<method>``."""
        try:
            params = parse_request(content_type, body, query)
        except WorkspaceError as exc:
            self.workspace.log_call(method, {}, status=200, error=exc.error)
            return ApiResponse(200, _error_body(exc))
        return self.handle(method, params, authorization=authorization)

    def handle(
        self, method: str, params: Mapping[str, Any], *, authorization: str | None = None
    ) -> ApiResponse:
        """Answer a call of ``method`` with decoded arguments (a ``token`` argument counts)."""
        token = bearer_token(authorization)
        args = dict(params)
        token = token or _text(args, "token")
        args.pop("token", None)
        delay = self.workspace.call_delay()
        if delay > 0:
            time.sleep(delay)  # the scripted slowness of a struggling Slack
        response = self._answer(method, args, token)
        error = (
            None
            if response.body.get("ok")
            else str(response.body.get("error") or f"http_{response.status}")
        )
        self.workspace.log_call(method, args, status=response.status, error=error)
        self.workspace.wait_for_release(method)
        return response

    def _answer(self, method: str, args: Mapping[str, Any], token: str | None) -> ApiResponse:
        if token and (method == APPS_CONNECTIONS_OPEN or token in self._app_tokens):
            return self._app_level(method, token)
        handler = self._handlers.get(method)
        if handler is None:
            return ApiResponse(200, {"ok": False, "error": "unknown_method", "req_method": method})
        if not token:
            return ApiResponse(200, {"ok": False, "error": "not_authed"})
        if token not in self.tokens:
            return ApiResponse(200, {"ok": False, "error": "invalid_auth"})
        fault = self.workspace.take_fault(method)
        if fault is not None and fault.kind != "warning":
            return _fault_answer(fault)
        try:
            answer = ApiResponse(
                200, {"ok": True, **handler(args)}, {"x-oauth-scopes": ",".join(self.scopes)}
            )
        except WorkspaceError as exc:
            return ApiResponse(200, _error_body(exc))
        except Exception:
            log.exception("sandbox Slack API failed on %s", method)
            return ApiResponse(500, {"ok": False, "error": "internal_error"})
        return answer if fault is None else _with_warning(answer, fault.error)

    def _app_level(self, method: str, token: str) -> ApiResponse:
        """An app-level token opens Socket Mode connections and does nothing else; no other
        token opens them."""
        if token not in self._app_tokens:
            error = "not_allowed_token_type" if token in self.tokens else "invalid_auth"
            return ApiResponse(200, {"ok": False, "error": error})
        if method != APPS_CONNECTIONS_OPEN:
            return ApiResponse(200, {"ok": False, "error": "not_allowed_token_type"})
        fault = self.workspace.take_fault(method)
        if fault is not None and fault.kind != "warning":
            return _fault_answer(fault)
        if self._socket_urls is None:
            return ApiResponse(200, {"ok": False, "error": "socket_mode_not_enabled"})
        return ApiResponse(200, {"ok": True, "url": self._socket_urls()})

    # -- methods -----------------------------------------------------------------------------

    def _auth_test(self, params: Mapping[str, Any]) -> JsonObject:
        ws = self.workspace
        return {
            "url": ws.url,
            "team": ws.team_name,
            "user": ws.bot_user.name,
            "team_id": ws.team_id,
            "user_id": ws.bot_user.id,
            "bot_id": ws.bot_id,
            "is_enterprise_install": False,
        }

    def _chat_post_message(self, params: Mapping[str, Any]) -> JsonObject:
        ws = self.workspace
        message = ws.post_message(
            _required(params, "channel", "channel_not_found"),
            text=_text(params, "text") or "",
            blocks=_blocks_arg(params),
            thread_ts=_text(params, "thread_ts") or None,
            reply_broadcast=_flag(params, "reply_broadcast"),
            metadata=_metadata_arg(params),
        )
        return {
            "channel": message.channel,
            "ts": message.ts,
            "message": message.to_api(team_id=ws.team_id, app_id=ws.app_id),
        }

    def _chat_update(self, params: Mapping[str, Any]) -> JsonObject:
        ws = self.workspace
        channel = ws.resolve_channel(_required(params, "channel", "channel_not_found")).id
        message = ws.update_message(
            channel,
            _required(params, "ts", "message_not_found"),
            text=_text(params, "text"),
            blocks=_blocks_arg(params),
        )
        return {
            "channel": channel,
            "ts": message.ts,
            "text": message.text,
            "message": message.to_api(team_id=ws.team_id, app_id=ws.app_id),
        }

    def _chat_post_ephemeral(self, params: Mapping[str, Any]) -> JsonObject:
        message = self.workspace.post_ephemeral(
            _required(params, "channel", "channel_not_found"),
            _required(params, "user", "user_not_in_channel"),
            text=_text(params, "text") or "",
            blocks=_blocks_arg(params),
            thread_ts=_text(params, "thread_ts") or None,
        )
        return {"message_ts": message.message_ts}

    def _chat_get_permalink(self, params: Mapping[str, Any]) -> JsonObject:
        channel = _required(params, "channel", "channel_not_found")
        link = self.workspace.permalink(
            channel, _required(params, "message_ts", "message_not_found")
        )
        return {"channel": channel, "permalink": link}

    def _conversations_info(self, params: Mapping[str, Any]) -> JsonObject:
        ws = self.workspace
        channel = ws.channel(_required(params, "channel", "channel_not_found"))
        if channel is None:
            raise WorkspaceError("channel_not_found")
        return {
            "channel": {
                "id": channel.id,
                "name": channel.name,
                "is_im": channel.is_im,
                "is_archived": ws.is_archived(channel.id),
                "is_member": ws.is_member(channel.id, ws.bot_user.id),
            }
        }

    def _conversations_open(self, params: Mapping[str, Any]) -> JsonObject:
        ws = self.workspace
        channel_id = _text(params, "channel")
        users = [u.strip() for u in (_text(params, "users") or "").split(",") if u.strip()]
        if channel_id:
            channel = ws.channel(channel_id)
            if channel is None or not channel.is_im:
                raise WorkspaceError("channel_not_found")
            already_open = True
        elif not users:
            raise WorkspaceError("users_list_not_supplied")
        elif len(users) > 1:
            raise WorkspaceError(
                "invalid_arguments",
                ["[ERROR] the sandbox opens 1:1 DMs only [json-pointer:/users]"],
            )
        else:
            already_open = any(c.is_im and c.user == users[0] for c in ws.channels())
            channel = ws.open_im(users[0])
        body: JsonObject = {
            "channel": channel.to_api() if _flag(params, "return_im") else {"id": channel.id}
        }
        if already_open:
            body.update(no_op=True, already_open=True)
        return body

    def _users_info(self, params: Mapping[str, Any]) -> JsonObject:
        user = self.workspace.user(_required(params, "user", "user_not_found"))
        if user is None:
            raise WorkspaceError("user_not_found")
        return {"user": user.to_api(self.workspace.team_id)}

    def _views_open(self, params: Mapping[str, Any]) -> JsonObject:
        trigger_id = _text(params, "trigger_id") or _text(params, "interactivity_pointer")
        view = _view_arg(params)
        if not trigger_id:
            raise WorkspaceError(
                "invalid_arguments", ["[ERROR] missing required field: trigger_id"]
            )
        return {"view": self.workspace.open_view(trigger_id, view).view}

    def _views_push(self, params: Mapping[str, Any]) -> JsonObject:
        trigger_id = _text(params, "trigger_id") or _text(params, "interactivity_pointer")
        view = _view_arg(params)
        if not trigger_id:
            raise WorkspaceError(
                "invalid_arguments", ["[ERROR] missing required field: trigger_id"]
            )
        return {"view": self.workspace.push_view(trigger_id, view).view}

    def _views_update(self, params: Mapping[str, Any]) -> JsonObject:
        updated = self.workspace.update_view(
            _view_arg(params),
            view_id=_text(params, "view_id") or None,
            external_id=_text(params, "external_id") or None,
            hash=_text(params, "hash") or None,
        )
        return {"view": updated.view}

    def _views_publish(self, params: Mapping[str, Any]) -> JsonObject:
        user_id = _required(params, "user_id", "invalid_arguments")
        view = _view_arg(params)
        published = self.workspace.publish_home(user_id, view, hash=_text(params, "hash"))
        return {"view": published.view}

    def _set_thread_status(self, params: Mapping[str, Any]) -> JsonObject:
        """Slack accepts either scope for it (``assistant:write`` is being phased out)."""
        if not {"chat:write", "assistant:write"} & set(self.scopes):
            raise MissingScope("chat:write", self.scopes)
        channel = _required(params, "channel_id", "invalid_arguments")
        thread_ts = _required(params, "thread_ts", "invalid_arguments")
        status = _text(params, "status")
        if status is None:
            raise WorkspaceError("invalid_arguments", ["[ERROR] missing required field: status"])
        self.workspace.set_thread_status(channel, thread_ts, status)
        return {}


class MissingScope(WorkspaceError):
    """The token lacks the scope a method needs: Slack names it and those the token has."""

    def __init__(self, needed: str, provided: Sequence[str]) -> None:
        super().__init__("missing_scope")
        self.needed = needed
        self.provided = ",".join(provided)


def _fault_answer(fault: Fault) -> ApiResponse:
    """The answer a scripted fault gives instead of doing the call."""
    if fault.kind == "bare":
        return ApiResponse(200, {"ok": True})
    if fault.kind == "no_error":
        return ApiResponse(fault.status, {"ok": False})
    if fault.kind == "html":
        return ApiResponse(fault.status, {}, html=HTML_ERROR_PAGE)
    if fault.kind == "disconnect":
        return ApiResponse(0, {}, dropped=True)
    headers = {"Retry-After": str(fault.retry_after)} if fault.kind == "ratelimited" else {}
    return ApiResponse(fault.status, {"ok": False, "error": fault.error}, headers)


def _with_warning(answer: ApiResponse, warning: str) -> ApiResponse:
    """``answer`` with Slack's warning fields, if it succeeded."""
    if not answer.body.get("ok"):
        return answer
    metadata = {**answer.body.get("response_metadata", {}), "warnings": [warning]}
    body = {**answer.body, "warning": warning, "response_metadata": metadata}
    return ApiResponse(answer.status, body, answer.headers)


def _error_body(exc: WorkspaceError) -> JsonObject:
    body: JsonObject = {"ok": False, "error": exc.error}
    if isinstance(exc, MissingScope):
        body.update(needed=exc.needed, provided=exc.provided)
    if exc.messages:
        body["response_metadata"] = {"messages": list(exc.messages)}
    return body
