"""The sandbox workspace's records, and ``WorkspaceError``, a refusal in Slack's words.

Records are immutable snapshots: the workspace replaces a record on change, never mutates it.
Treat their ``blocks`` and ``view`` payloads as read-only.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

JsonObject = dict[str, Any]
"""A decoded JSON object (Block Kit blocks, views, API bodies)."""

EventKind = Literal[
    "api_call",
    "channel_created",
    "user_added",
    "message_posted",
    "message_updated",
    "ephemeral_posted",
    "view_opened",
    "view_updated",
    "view_pushed",
    "view_closed",
    "home_published",
    "thread_status_set",
]


class WorkspaceError(Exception):
    """A refusal in Slack's words: ``error`` is the API error code, ``messages`` the details.

    ``messages`` are the ``response_metadata.messages`` Slack adds to Block Kit errors, e.g.
    ``"[ERROR] no more than 50 items allowed [json-pointer:/blocks]"``.
    """

    def __init__(self, error: str, messages: Sequence[str] = ()) -> None:
        super().__init__(error if not messages else f"{error}: {'; '.join(messages)}")
        self.error = error
        self.messages = tuple(messages)


@dataclass(frozen=True)
class User:
    """A member of the workspace (the bot user too, with ``is_bot``)."""

    id: str
    name: str
    real_name: str
    is_bot: bool = False

    def to_api(self, team_id: str) -> JsonObject:
        """Return the user object ``users.info`` answers with."""
        return {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "real_name": self.real_name,
            "deleted": False,
            "is_bot": self.is_bot,
            "is_app_user": False,
            "profile": {
                "real_name": self.real_name,
                "real_name_normalized": self.real_name,
                "display_name": self.name,
                "display_name_normalized": self.name,
                "team": team_id,
            },
        }


@dataclass(frozen=True)
class Channel:
    """A public channel, or an IM (``is_im``) between the bot and ``user``."""

    id: str
    name: str
    is_im: bool = False
    user: str | None = None
    created: int = 0

    def to_api(self) -> JsonObject:
        """Return the conversation object the Web API answers with."""
        if self.is_im:
            return {
                "id": self.id,
                "created": self.created,
                "is_im": True,
                "user": self.user,
                "is_open": True,
            }
        return {
            "id": self.id,
            "name": self.name,
            "created": self.created,
            "is_channel": True,
            "is_im": False,
            "is_member": True,
        }


@dataclass(frozen=True)
class MessageRevision:
    """A message's content before an edit; ``replaced_at`` is the ts of the edit."""

    text: str
    blocks: list[JsonObject] | None
    replaced_at: str


@dataclass(frozen=True)
class Message:
    """A message in a channel; ``thread_ts`` is set on replies (it is the parent's ``ts``).

    ``user`` is the author's user id; ``bot_id`` is set when the bot posted it. ``edits`` holds
    the earlier versions, oldest first; ``edited_ts`` the ts of the latest edit.
    """

    channel: str
    ts: str
    text: str
    user: str
    blocks: list[JsonObject] | None = None
    bot_id: str | None = None
    thread_ts: str | None = None
    reply_broadcast: bool = False
    edits: tuple[MessageRevision, ...] = ()
    edited_ts: str | None = None
    metadata: JsonObject | None = None

    @property
    def is_reply(self) -> bool:
        """Return whether the message is a thread reply."""
        return self.thread_ts is not None and self.thread_ts != self.ts

    def to_api(
        self, *, team_id: str, app_id: str | None = None, include_metadata: bool = True
    ) -> JsonObject:
        """Return the message object the Web API answers with (history calls show its
        metadata only when asked, with ``include_all_metadata``)."""
        payload: JsonObject = {
            "type": "message",
            "user": self.user,
            "text": self.text,
            "ts": self.ts,
            "team": team_id,
        }
        if self.bot_id is not None:
            payload["bot_id"] = self.bot_id
            if app_id is not None:
                payload["app_id"] = app_id
        if self.blocks is not None:
            payload["blocks"] = copy.deepcopy(self.blocks)
        if self.thread_ts is not None:
            payload["thread_ts"] = self.thread_ts
        if self.reply_broadcast:
            payload["subtype"] = "thread_broadcast"
        if self.edited_ts is not None:
            payload["edited"] = {"user": self.user, "ts": self.edited_ts}
        if self.metadata is not None and include_metadata:
            payload["metadata"] = copy.deepcopy(self.metadata)
        return payload


@dataclass(frozen=True)
class EphemeralMessage:
    """A message only ``user`` sees in ``channel``; it cannot be updated."""

    channel: str
    user: str
    message_ts: str
    text: str
    blocks: list[JsonObject] | None = None
    thread_ts: str | None = None


@dataclass(frozen=True)
class View:
    """A modal. ``view`` is the payload as the API returns it (with ``id``, ``hash``, ...).

    ``trigger_id`` is the trigger exchanged to open (or push) it; ``updates`` are the payloads
    ``views.update`` sent, in order. Views pushed on top of it share its ``root_view_id``.
    """

    id: str
    trigger_id: str
    user: str | None
    view: JsonObject
    hash: str
    private_metadata: str
    external_id: str | None
    root_view_id: str
    previous_view_id: str | None
    is_open: bool = True
    updates: tuple[JsonObject, ...] = ()


@dataclass(frozen=True)
class ApiCall:
    """One request the API received: method, arguments (token removed), HTTP status, outcome."""

    method: str
    params: JsonObject
    at: float
    status: int
    ok: bool
    error: str | None


@dataclass(frozen=True)
class Trigger:
    """A ``trigger_id`` the workspace issued for an interaction by ``user``."""

    id: str
    user: str | None
    issued_at: float
    view_id: str | None = None
    used: bool = False


@dataclass(frozen=True)
class Fault:
    """A scripted answer for the next call of a method, each one an answer Slack (or Slack's
    own mock servers) gives:

    - ``ratelimited``: HTTP 429, ``Retry-After`` and ``{"ok": false, "error": "ratelimited"}``;
    - ``error``: ``{"ok": false, "error": <error>}`` with a status;
    - ``bare``: ``{"ok": true}`` alone, doing nothing;
    - ``no_error``: ``{"ok": false}`` with no ``error`` field, with a status (often a 5xx);
    - ``html``: an HTML error page (``text/html``) with a status, as Slack's edge answers
      when it is down (503) or the path is wrong (404);
    - ``disconnect``: the connection is closed without any answer;
    - ``warning``: the call is done and answered ``ok``, with Slack's ``warning`` field and
      ``response_metadata.warnings`` (``error`` names the warning).
    """

    kind: Literal["ratelimited", "error", "bare", "no_error", "html", "disconnect", "warning"]
    error: str
    status: int
    retry_after: int = 0


@dataclass(frozen=True)
class WorkspaceEvent:
    """A change in the workspace, numbered from 1; ``subject`` is the new or changed record."""

    seq: int
    kind: EventKind
    at: float
    subject: Message | EphemeralMessage | View | Channel | User | ApiCall


@dataclass(frozen=True)
class SavedState:
    """What a workspace keeps across restarts: people, channels, messages and ephemerals."""

    users: list[User]
    channels: list[Channel]
    bot_channels: list[str]
    archived: list[str]
    messages: list[Message]
    ephemerals: list[EphemeralMessage]
    next_id: int
    last_ts_us: int
