"""Messages in the sandbox workspace: posting, editing, ephemerals, threads, permalinks."""

from __future__ import annotations

import copy
import re
from dataclasses import replace

from devkit.sandbox.blockkit import validate_message_blocks
from devkit.sandbox.records import (
    EphemeralMessage,
    JsonObject,
    Message,
    MessageRevision,
    User,
    WorkspaceError,
)
from devkit.sandbox.workspace_core import WorkspaceCore

MAX_MESSAGE_TEXT = 40_000

_TS_RE = re.compile(r"^\d{1,12}(\.\d{1,6})?$")


class MessagesMixin(WorkspaceCore):
    """The workspace's messages: channel timelines, threads, edits and ephemeral messages."""

    def post_message(
        self,
        channel: str,
        *,
        text: str = "",
        blocks: list[JsonObject] | None = None,
        thread_ts: str | None = None,
        user: str | None = None,
        reply_broadcast: bool = False,
        metadata: JsonObject | None = None,
    ) -> Message:
        """Post a message as the bot (or as ``user``, for a person typing in the sandbox).

        Raises WorkspaceError with Slack's code: ``channel_not_found``, ``not_in_channel``,
        ``is_archived``, ``no_text``, ``msg_too_long``, ``invalid_blocks``,
        ``invalid_thread_ts``, ``thread_not_found``.
        """
        target = self.resolve_channel(channel)
        _check_content(text, blocks)
        with self._lock:
            author = self._author(user)
            if author.is_bot:
                self.check_bot_may_post(target)
            parent = None
            if thread_ts is not None:
                if not _TS_RE.match(thread_ts):
                    raise WorkspaceError(
                        "invalid_thread_ts", [f"[ERROR] {thread_ts} is not a valid thread_ts"]
                    )
                parent = self._find_locked(target.id, thread_ts)
                if parent is None:
                    raise WorkspaceError("thread_not_found")
            message = Message(
                channel=target.id,
                ts=self._next_ts(),
                text=text,
                user=author.id,
                blocks=copy.deepcopy(blocks),
                bot_id=self.bot_id if author.is_bot else None,
                thread_ts=None if parent is None else (parent.thread_ts or parent.ts),
                reply_broadcast=reply_broadcast and parent is not None,
                metadata=copy.deepcopy(metadata),
            )
            self._messages[target.id].append(message)
            event = self._event_locked("message_posted", message)
        self._deliver(event)
        return message

    def update_message(
        self,
        channel: str,
        ts: str,
        *,
        text: str | None = None,
        blocks: list[JsonObject] | None = None,
        user: str | None = None,
    ) -> Message:
        """Edit a message; omitted ``text``/``blocks`` keep their value, ``blocks=[]`` drops them.

        Only the author can edit (``cant_update_message``); ``message_not_found`` for an
        unknown ts.
        """
        with self._lock:
            if channel not in self._channels:
                raise WorkspaceError("channel_not_found")
            old = self._find_locked(channel, ts)
            if old is None:
                raise WorkspaceError("message_not_found")
            if old.user != self._author(user).id:
                raise WorkspaceError("cant_update_message")
            new_text = old.text if text is None else text
            new_blocks = old.blocks if blocks is None else (copy.deepcopy(blocks) or None)
            _check_content(new_text, new_blocks)
            edit_ts = self._next_ts()
            updated = replace(
                old,
                text=new_text,
                blocks=new_blocks,
                edited_ts=edit_ts,
                edits=(*old.edits, MessageRevision(old.text, old.blocks, edit_ts)),
            )
            timeline = self._messages[channel]
            timeline[timeline.index(old)] = updated
            event = self._event_locked("message_updated", updated)
        self._deliver(event)
        return updated

    def post_ephemeral(
        self,
        channel: str,
        user: str,
        *,
        text: str = "",
        blocks: list[JsonObject] | None = None,
        thread_ts: str | None = None,
    ) -> EphemeralMessage:
        """Show a message to one user in a channel (``user_not_in_channel`` if they are not)."""
        target = self.resolve_channel(channel)
        _check_content(text, blocks)
        with self._lock:
            if not self.is_member(target.id, user):
                raise WorkspaceError("user_not_in_channel")
            message = EphemeralMessage(
                target.id, user, self._next_ts(), text, copy.deepcopy(blocks), thread_ts
            )
            self._ephemerals.append(message)
            event = self._event_locked("ephemeral_posted", message)
        self._deliver(event)
        return message

    def messages(self, channel: str, thread_ts: str | None = None) -> list[Message]:
        """Return a channel's timeline (top-level and broadcast replies), or one thread's replies.

        With ``thread_ts``: the replies to that parent, oldest first, without the parent.
        """
        with self._lock:
            timeline = self._messages.get(channel, [])
            if thread_ts is None:
                return [m for m in timeline if not m.is_reply or m.reply_broadcast]
            return [m for m in timeline if m.is_reply and m.thread_ts == thread_ts]

    def thread(self, channel: str, ts: str) -> list[Message]:
        """Return a thread: the parent message, then its replies (empty if there is no parent)."""
        with self._lock:
            parent = self._find_locked(channel, ts)
            if parent is None:
                return []
            return [parent, *self.messages(channel, thread_ts=parent.ts)]

    def find_message(self, channel: str, ts: str) -> Message | None:
        """Return the message with this ts in a channel, if any."""
        with self._lock:
            return self._find_locked(channel, ts)

    def ephemerals(
        self, channel: str | None = None, user: str | None = None
    ) -> list[EphemeralMessage]:
        """Return ephemeral messages, optionally for one channel and/or one user."""
        with self._lock:
            return [
                e
                for e in self._ephemerals
                if (channel is None or e.channel == channel) and (user is None or e.user == user)
            ]

    def permalink(self, channel: str, ts: str) -> str:
        """Return a message's permalink (``message_not_found`` / ``channel_not_found``)."""
        with self._lock:
            if channel not in self._channels:
                raise WorkspaceError("channel_not_found")
            message = self._find_locked(channel, ts)
            if message is None:
                raise WorkspaceError("message_not_found")
        link = f"{self.permalink_base}/archives/{channel}/p{ts.replace('.', '')}"
        if message.is_reply:
            link += f"?thread_ts={message.thread_ts}&cid={channel}"
        return link

    def _next_ts(self) -> str:
        """Return a unique ts, later than any before it (microsecond steps within a second)."""
        now_us = int(self._clock() * 1_000_000)
        self._last_ts_us = max(now_us, self._last_ts_us + 1)
        seconds, micros = divmod(self._last_ts_us, 1_000_000)
        return f"{seconds}.{micros:06d}"

    def _author(self, user: str | None) -> User:
        if user is None:
            return self.bot_user
        author = self._users.get(user)
        if author is None:
            raise WorkspaceError("user_not_found")
        return author

    def _find_locked(self, channel: str, ts: str) -> Message | None:
        for message in self._messages.get(channel, []):
            if message.ts == ts:
                return message
        return None


def _check_content(text: str, blocks: list[JsonObject] | None) -> None:
    if len(text) > MAX_MESSAGE_TEXT:
        raise WorkspaceError("msg_too_long")
    if blocks is not None:
        errors = validate_message_blocks(blocks)
        if errors:
            raise WorkspaceError("invalid_blocks", errors)
    if not text and not blocks:
        raise WorkspaceError("no_text")
