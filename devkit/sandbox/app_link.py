"""Slack's side of the app connection: people's actions become signed HTTP requests to the app.

``AppLink`` does what Slack does when someone types a slash command, clicks a button (in a
message, an ephemeral message or a modal) or submits a modal: it issues a ``trigger_id`` from
the workspace, builds the request as Slack shapes it (``devkit.sandbox.payloads``), signs it with
the app's signing secret and posts it to the app's request URL, then acts on the answer the
way Slack's client does (an ephemeral message for a slash command's body, ``response_action``
for a modal). Everything else the app says goes through the Web API.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlencode

from devkit.sandbox.payloads import (
    VERIFICATION_TOKEN,
    InMessage,
    Origin,
    find_element,
    message_action_payload,
    slash_command_form,
    view_action_payload,
    view_closed_payload,
    view_submission_payload,
)
from devkit.sandbox.records import JsonObject, User, View, WorkspaceError
from devkit.sandbox.signing import signed_headers
from devkit.sandbox.workspace import Workspace

log = logging.getLogger(__name__)

ACK_TIMEOUT_S = 3.0
RESPONSE_URL_USES = 5
RESPONSE_URL_TTL_S = 30 * 60
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"
MODAL_TROUBLE = "We had some trouble connecting. Try again?"
Values = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class AppAnswer:
    """The app's answer to one request: HTTP status and body, or Slack's name for a failure."""

    status: int
    body: bytes = b""
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Return whether the app acknowledged in time with HTTP 200."""
        return self.error is None and self.status == 200

    def json(self) -> JsonObject | None:
        """Return the body as a JSON object, if it is one."""
        try:
            decoded = json.loads(self.body.decode("utf-8")) if self.body.strip() else None
        except (UnicodeDecodeError, ValueError):
            return None
        return decoded if isinstance(decoded, dict) else None


@dataclass(frozen=True, slots=True)
class SubmitResult:
    """What became of a modal submission: closed, or kept open with errors per block."""

    closed: bool
    errors: dict[str, str] = field(default_factory=dict)
    error: str | None = None


@dataclass(slots=True)
class _ResponseTarget:
    channel: str
    user: str
    thread_ts: str | None
    expires_at: float
    uses_left: int = RESPONSE_URL_USES


class AppLink:
    """Delivers people's actions in a workspace to one app, signed, over HTTP."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        request_url: str,
        signing_secret: str,
        response_url_base: str,
        commands: tuple[str, ...] = ("/agent",),
        timeout: float = ACK_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not request_url.startswith(("http://", "https://")):
            raise ValueError(f"the app's request URL must be http(s), not {request_url!r}")
        self.workspace = workspace
        self.request_url = request_url
        self.commands = commands
        self._secret = signing_secret
        self._response_base = response_url_base.rstrip("/")
        self._timeout = timeout
        self._clock = clock
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._responses: dict[str, _ResponseTarget] = {}
        self._lock = threading.Lock()

    # -- slash commands ----------------------------------------------------------------------

    def slash_command(self, user_id: str, channel_id: str, line: str) -> AppAnswer:
        """Run ``line`` (``/command text``) as ``user_id`` typed it in ``channel_id``."""
        origin = Origin(self._user(user_id), channel_id)
        command, _, text = line.strip().partition(" ")
        if command not in self.commands:
            self.workspace.post_ephemeral(
                channel_id,
                user_id,
                text=f"`{command}` is not a valid command. In Slack, all messages that start "
                'with the "/" character are interpreted as commands.',
            )
            return AppAnswer(404, error="unknown_command")
        form = slash_command_form(
            self.workspace,
            origin,
            command,
            text.strip(),
            trigger_id=self.workspace.issue_trigger(user_id),
            response_url=self._response_url(channel_id, user_id, None),
        )
        answer = self._post(urlencode(form).encode())
        if not answer.ok:
            self.workspace.post_ephemeral(
                channel_id,
                user_id,
                text=f'{command} failed with the error "{answer.error or "dispatch_failed"}"',
            )
            return answer
        self._show_command_reply(origin, line, answer)
        return answer

    def _show_command_reply(self, origin: Origin, line: str, answer: AppAnswer) -> None:
        assert origin.channel_id is not None
        if not answer.body.strip():
            return
        body = answer.json()
        if body is None:
            self.workspace.post_ephemeral(
                origin.channel_id, origin.user.id, text=answer.body.decode("utf-8", "replace")
            )
            return
        self._show_message(body, origin.channel_id, origin.user.id, None, echo=line)

    def _show_message(
        self,
        body: JsonObject,
        channel: str,
        user: str,
        thread_ts: str | None,
        *,
        echo: str | None = None,
    ) -> None:
        text = str(body.get("text") or "")
        blocks = body.get("blocks") if isinstance(body.get("blocks"), list) else None
        if not text and not blocks:
            return
        if body.get("response_type") == "in_channel":
            if echo is not None:
                self.workspace.post_message(channel, text=echo, user=user)
            self.workspace.post_message(channel, text=text, blocks=blocks, thread_ts=thread_ts)
        else:
            self.workspace.post_ephemeral(
                channel, user, text=text, blocks=blocks, thread_ts=thread_ts
            )

    # -- clicks ------------------------------------------------------------------------------

    def click(
        self,
        user_id: str,
        *,
        channel_id: str,
        message_ts: str,
        action_id: str,
        block_id: str | None = None,
    ) -> AppAnswer:
        """Click a button in a message, as ``user_id``."""
        user = self._user(user_id)
        message = self.workspace.find_message(channel_id, message_ts)
        if message is None:
            raise WorkspaceError("message_not_found")
        return self._click_message(user, message, action_id, block_id)

    def click_ephemeral(
        self,
        user_id: str,
        *,
        channel_id: str,
        message_ts: str,
        action_id: str,
        block_id: str | None = None,
    ) -> AppAnswer:
        """Click a button in an ephemeral message, as the person it was shown to.

        Only they see it, so anyone else's click is refused (``ephemeral_of_another_user``);
        an unknown ts is ``message_not_found``.
        """
        user = self._user(user_id)
        shown = [
            e for e in self.workspace.ephemerals(channel=channel_id) if e.message_ts == message_ts
        ]
        if not shown:
            raise WorkspaceError("message_not_found")
        if shown[0].user != user_id:
            raise WorkspaceError("ephemeral_of_another_user")
        return self._click_message(user, shown[0], action_id, block_id)

    def _click_message(
        self, user: User, message: InMessage, action_id: str, block_id: str | None
    ) -> AppAnswer:
        origin = Origin(user, message.channel)
        found = find_element(message.blocks, block_id, action_id)
        if found is None:
            raise WorkspaceError("action_not_found")
        element, real_block_id = found
        payload = message_action_payload(
            self.workspace,
            origin,
            message,
            element,
            real_block_id,
            trigger_id=self.workspace.issue_trigger(user.id),
            response_url=self._response_url(message.channel, user.id, message.thread_ts),
            action_ts=self._action_ts(),
        )
        return self._post(urlencode({"payload": json.dumps(payload)}).encode())

    def click_in_view(
        self,
        user_id: str,
        view_id: str,
        *,
        action_id: str,
        block_id: str | None = None,
        values: Values | None = None,
    ) -> AppAnswer:
        """Click a button in a modal, as ``user_id``."""
        view = self._open_view(user_id, view_id)
        found = find_element(view.view.get("blocks"), block_id, action_id)
        if found is None:
            raise WorkspaceError("action_not_found")
        element, real_block_id = found
        payload = view_action_payload(
            self.workspace,
            Origin(self._user(user_id)),
            view,
            element,
            real_block_id,
            values or {},
            trigger_id=self.workspace.issue_trigger(user_id, view_id=view.id),
            action_ts=self._action_ts(),
        )
        return self._post(urlencode({"payload": json.dumps(payload)}).encode())

    # -- the Home tab ------------------------------------------------------------------------

    def open_home(self, user_id: str) -> AppAnswer:
        """Open the app's Home tab as ``user_id``: Slack sends ``app_home_opened``."""
        user = self._user(user_id)
        event = {
            "token": VERIFICATION_TOKEN,
            "team_id": self.workspace.team_id,
            "api_app_id": self.workspace.app_id,
            "type": "event_callback",
            "event_id": f"Ev{secrets.token_hex(8).upper()}",
            "event_time": int(self._clock()),
            "authorizations": [
                {"team_id": self.workspace.team_id, "user_id": self.workspace.bot_user.id}
            ],
            "event": {
                "type": "app_home_opened",
                "user": user.id,
                "tab": "home",
                "event_ts": self._action_ts(),
            },
        }
        return self._post(json.dumps(event).encode(), content_type=JSON)

    def click_in_home(
        self, user_id: str, *, action_id: str, block_id: str | None = None
    ) -> AppAnswer:
        """Click a button on ``user_id``'s Home tab, as published last."""
        home = self.workspace.home(self._user(user_id).id)
        found = None if home is None else find_element(home.view.get("blocks"), block_id, action_id)
        if home is None or found is None:
            raise WorkspaceError("action_not_found")
        element, real_block_id = found
        payload = view_action_payload(
            self.workspace,
            Origin(self._user(user_id)),
            home,
            element,
            real_block_id,
            {},
            trigger_id=self.workspace.issue_trigger(user_id),
            action_ts=self._action_ts(),
        )
        return self._post(urlencode({"payload": json.dumps(payload)}).encode())

    # -- modals ------------------------------------------------------------------------------

    def submit_view(self, user_id: str, view_id: str, values: Values) -> SubmitResult:
        """Submit a modal; act on the app's ``response_action`` as Slack does."""
        view = self._open_view(user_id, view_id)
        payload = view_submission_payload(
            self.workspace,
            Origin(self._user(user_id)),
            view,
            values,
            trigger_id=self.workspace.issue_trigger(user_id, view_id=view.id),
        )
        answer = self._post(urlencode({"payload": json.dumps(payload)}).encode())
        if not answer.ok:
            return SubmitResult(closed=False, error=MODAL_TROUBLE)
        body = answer.json() or {}
        action = body.get("response_action")
        if action == "errors":
            errors = body.get("errors")
            found = errors.items() if isinstance(errors, dict) else ()
            return SubmitResult(closed=False, errors={str(k): str(v) for k, v in found})
        if action == "update" and isinstance(body.get("view"), dict):
            self.workspace.update_view(body["view"], view_id=view.id)
            return SubmitResult(closed=False)
        if action == "push" and isinstance(body.get("view"), dict):
            trigger = self.workspace.issue_trigger(user_id, view_id=view.id)
            self.workspace.push_view(trigger, body["view"])
            return SubmitResult(closed=False)
        self.workspace.close_view(view.id, clear=action == "clear")
        return SubmitResult(closed=True)

    def close_view(self, user_id: str, view_id: str) -> None:
        """Close a modal with its Cancel button; tell the app if it asked to be told."""
        view = self._open_view(user_id, view_id)
        self.workspace.close_view(view.id)
        if view.view.get("notify_on_close"):
            payload = view_closed_payload(self.workspace, Origin(self._user(user_id)), view)
            self._post(urlencode({"payload": json.dumps(payload)}).encode())

    # -- response_url ------------------------------------------------------------------------

    def respond(self, token: str, body: JsonObject) -> tuple[int, JsonObject]:
        """Handle a POST to a ``response_url`` the sandbox handed out."""
        with self._lock:
            target = self._responses.get(token)
            if target is None or target.expires_at < self._clock() or target.uses_left < 1:
                return 404, {"ok": False, "error": "expired_url"}
            target.uses_left -= 1
        try:
            self._show_message(
                body, target.channel, target.user, body.get("thread_ts") or target.thread_ts
            )
        except WorkspaceError as exc:
            return 200, {"ok": False, "error": exc.error}
        return 200, {"ok": True}

    def _response_url(self, channel: str, user: str, thread_ts: str | None) -> str:
        token = secrets.token_urlsafe(18)
        with self._lock:
            now = self._clock()
            self._responses = {k: v for k, v in self._responses.items() if v.expires_at >= now}
            self._responses[token] = _ResponseTarget(
                channel, user, thread_ts, now + RESPONSE_URL_TTL_S
            )
        return f"{self._response_base}/{token}"

    # -- plumbing ----------------------------------------------------------------------------

    def _post(self, body: bytes, content_type: str = FORM) -> AppAnswer:
        headers = signed_headers(self._secret, body, content_type=content_type, clock=self._clock)
        request = urllib.request.Request(  # noqa: S310 - http(s) only, checked in __init__
            self.request_url, data=body, headers=headers, method="POST"
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                return AppAnswer(response.status, response.read())
        except urllib.error.HTTPError as exc:
            log.warning("the app answered HTTP %s", exc.code)
            return AppAnswer(exc.code, exc.read(), error="http_client_error")
        except TimeoutError:
            return AppAnswer(0, error="operation_timeout")
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                return AppAnswer(0, error="operation_timeout")
            log.warning("the app cannot be reached: %s", exc.reason)
            return AppAnswer(0, error="dispatch_failed")

    def _user(self, user_id: str) -> User:
        user = self.workspace.user(user_id)
        if user is None or user.is_bot:
            raise WorkspaceError("user_not_found")
        return user

    def _open_view(self, user_id: str, view_id: str) -> View:
        view = self.workspace.view(view_id)
        if view is None or not view.is_open or view.user != user_id:
            raise WorkspaceError("view_not_found")
        return view

    def _action_ts(self) -> str:
        return f"{self._clock():.6f}"
