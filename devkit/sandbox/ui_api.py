"""What the sandbox page asks of the sandbox server: snapshots to draw, and people's actions.

The page never talks to the app: typing, clicking and submitting go to ``SandboxUi``, which
hands them to ``AppLink`` (signed HTTP requests to the app, as Slack sends them). What the
app says comes back only through the Web API into the workspace, which the page follows
with a long poll on the workspace's numbered events.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from devkit.sandbox.app_link import AppLink
from devkit.sandbox.records import EphemeralMessage, JsonObject, Message, WorkspaceError
from devkit.sandbox.workspace import Workspace

LONG_POLL_MAX_S = 25.0
Answer = tuple[int, JsonObject]


class Panel(Protocol):
    """An extra panel beside the channel (``signoff dev`` shows the ledger and the journal)."""

    def state(self, params: Mapping[str, str]) -> JsonObject:
        """Return what the panel shows now."""
        ...

    def act(self, action: str, body: JsonObject) -> JsonObject:
        """Do one of the panel's actions (a button on it)."""
        ...


@dataclass(frozen=True, slots=True)
class Persona:
    """A person the page can act as, with the role shown in the switcher."""

    user_id: str
    name: str
    real_name: str
    role: str


class SandboxUi:
    """The page's API: snapshots of the workspace for one person, and their actions."""

    def __init__(
        self,
        workspace: Workspace,
        link: AppLink,
        personas: Sequence[Persona],
        *,
        panel: Panel | None = None,
        title: str = "Signoff sandbox",
    ) -> None:
        self.workspace = workspace
        self.link = link
        self.personas = tuple(personas)
        self.panel = panel
        self.title = title
        for persona in self.personas:
            if workspace.user(persona.user_id) is None:
                workspace.add_user(
                    persona.name, real_name=persona.real_name, user_id=persona.user_id
                )

    # -- reading -----------------------------------------------------------------------------

    def bootstrap(self) -> JsonObject:
        """Return what the page needs once: the team, the people, the bot, the commands."""
        ws = self.workspace
        return {
            "title": self.title,
            "team": {"id": ws.team_id, "name": ws.team_name},
            "bot": {"id": ws.bot_user.id, "name": ws.bot_user.name},
            "personas": [
                {"id": p.user_id, "name": p.name, "real_name": p.real_name, "role": p.role}
                for p in self.personas
            ],
            "users": {u.id: u.real_name or u.name for u in ws.users()},
            "commands": list(self.link.commands),
            "panel": self.panel is not None,
        }

    def state(self, params: Mapping[str, str]) -> JsonObject:
        """Return what ``user`` sees: channels, a channel's timeline, a thread, an open modal,
        their Home tab."""
        ws = self.workspace
        user = self._persona(params.get("user", ""))
        channels = [c for c in ws.channels() if ws.is_member(c.id, user)]
        channel = params.get("channel") or (channels[0].id if channels else "")
        if not ws.is_member(channel, user):
            channel = channels[0].id if channels else ""
        ephemerals = ws.ephemerals(channel=channel, user=user)
        timeline: list[JsonObject] = [self._message(m) for m in ws.messages(channel)]
        timeline += [_ephemeral(e) for e in ephemerals if e.thread_ts is None]
        timeline.sort(key=lambda m: float(m["ts"]))
        return {
            "user": user,
            "channel": channel,
            "channels": [{"id": c.id, "name": c.name, "is_im": c.is_im} for c in channels],
            "users": {u.id: u.real_name or u.name for u in ws.users()},
            "messages": timeline,
            "thread": self._thread(channel, params.get("thread") or "", ephemerals),
            "modal": self._modal(user),
            "home": self._home(user),
        }

    def changes(self, params: Mapping[str, str]) -> JsonObject:
        """Long poll: answer once the workspace changed after ``since`` (API calls aside)."""
        since = _int(params.get("since"), 0)
        timeout = min(max(_float(params.get("timeout"), LONG_POLL_MAX_S), 0.0), LONG_POLL_MAX_S)
        total = len(self.workspace.events())
        if since > total:  # a page left open across a restart: start over
            return {"seq": total, "changed": True}
        deadline = time.monotonic() + timeout
        while True:
            events = self.workspace.wait_for_events(since, max(0.0, deadline - time.monotonic()))
            if not events:
                return {"seq": since, "changed": False}
            since = events[-1].seq
            if any(e.kind != "api_call" for e in events):
                return {"seq": since, "changed": True}
            if time.monotonic() >= deadline:
                return {"seq": since, "changed": False}

    def _thread(
        self, channel: str, ts: str, ephemerals: list[EphemeralMessage]
    ) -> JsonObject | None:
        if not ts:
            return None
        messages = self.workspace.thread(channel, ts)
        if not messages:
            return None
        replies: list[JsonObject] = [self._message(m) for m in messages[1:]]
        replies += [_ephemeral(e) for e in ephemerals if e.thread_ts == ts]
        replies.sort(key=lambda m: float(m["ts"]))
        status = self.workspace.thread_status(channel, ts)
        return {"parent": self._message(messages[0]), "replies": replies, "status": status}

    def _message(self, message: Message) -> JsonObject:
        ws = self.workspace
        author = ws.user(message.user)
        replies = [] if message.is_reply else ws.messages(message.channel, thread_ts=message.ts)
        return {
            "ts": message.ts,
            "channel": message.channel,
            "user": message.user,
            "author": (author.real_name or author.name) if author else message.user,
            "is_bot": message.bot_id is not None,
            "text": message.text,
            "blocks": message.blocks,
            "thread_ts": message.thread_ts,
            "reply_count": len(replies),
            "edited": message.edited_ts is not None,
        }

    def _modal(self, user: str) -> JsonObject | None:
        views = [v for v in self.workspace.views(open_only=True) if v.user == user]
        if not views:
            return None
        top = views[-1]
        view = {k: v for k, v in top.view.items() if k != "state"}
        return {"id": top.id, "view": view}

    def _home(self, user: str) -> JsonObject | None:
        home = self.workspace.home(user)
        return None if home is None else {"id": home.id, "blocks": home.view.get("blocks", [])}

    # -- acting ------------------------------------------------------------------------------

    def act(self, action: str, body: JsonObject) -> Answer:
        """Do a person's action: ``command``, ``message``, ``home`` (open the Home tab),
        ``click``, ``submit``, ``close``."""
        try:
            user = self._persona(_str(body, "user"))
            if action == "command":
                answer = self.link.slash_command(user, _str(body, "channel"), _str(body, "text"))
                return 200, {"ok": answer.ok, "error": answer.error}
            if action == "message":
                self.workspace.post_message(
                    _str(body, "channel"),
                    text=_str(body, "text"),
                    thread_ts=body.get("thread_ts") or None,
                    user=user,
                )
                return 200, {"ok": True}
            if action == "home":
                answer = self.link.open_home(user)
                return 200, {"ok": answer.ok, "status": answer.status, "error": answer.error}
            if action == "click":
                return self._click(user, body)
            if action == "submit":
                result = self.link.submit_view(user, _str(body, "view_id"), _values(body))
                return 200, {
                    "ok": result.closed or not (result.errors or result.error),
                    "closed": result.closed,
                    "errors": result.errors,
                    "error": result.error,
                }
            if action == "close":
                self.link.close_view(user, _str(body, "view_id"))
                return 200, {"ok": True}
        except WorkspaceError as exc:
            return 400, {"ok": False, "error": exc.error}
        return 404, {"ok": False, "error": "unknown_action"}

    def _click(self, user: str, body: JsonObject) -> Answer:
        """Click on the Home tab (``home``), in a modal (``view_id``) or a message (``channel``,
        ``ts``, ``ephemeral``)."""
        block_id = body.get("block_id") or None
        if body.get("home") is True:
            answer = self.link.click_in_home(
                user, action_id=_str(body, "action_id"), block_id=block_id
            )
        elif body.get("view_id"):
            answer = self.link.click_in_view(
                user,
                _str(body, "view_id"),
                action_id=_str(body, "action_id"),
                block_id=block_id,
                values=_values(body),
            )
        else:
            click = self.link.click_ephemeral if body.get("ephemeral") is True else self.link.click
            answer = click(
                user,
                channel_id=_str(body, "channel"),
                message_ts=_str(body, "ts"),
                action_id=_str(body, "action_id"),
                block_id=block_id,
            )
        return 200, {"ok": answer.ok, "status": answer.status, "error": answer.error}

    def _persona(self, user_id: str) -> str:
        if not any(p.user_id == user_id for p in self.personas):
            raise WorkspaceError("user_not_found")
        return user_id


def _ephemeral(message: EphemeralMessage) -> JsonObject:
    return {
        "ts": message.message_ts,
        "channel": message.channel,
        "user": None,
        "author": "",
        "is_bot": True,
        "text": message.text,
        "blocks": message.blocks,
        "thread_ts": message.thread_ts,
        "reply_count": 0,
        "edited": False,
        "ephemeral": True,
    }


def _str(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise WorkspaceError("invalid_arguments")
    return value


def _values(body: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    raw = body.get("values") or {}
    if not isinstance(raw, dict):
        raise WorkspaceError("invalid_arguments")
    return {
        str(block): {str(k): str(v) for k, v in (fields or {}).items()}
        for block, fields in raw.items()
        if isinstance(fields, dict)
    }


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _float(value: str | None, default: float) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default
