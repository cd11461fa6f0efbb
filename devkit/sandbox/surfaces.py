"""The app's other surfaces in the sandbox workspace: each person's Home tab and the status
line of a thread (``views.publish`` and ``assistant.threads.setStatus``)."""

from __future__ import annotations

import copy
import json
import secrets

from devkit.sandbox.blockkit import validate_home
from devkit.sandbox.modals import MAX_VIEW_BYTES
from devkit.sandbox.records import JsonObject, View, WorkspaceError
from devkit.sandbox.workspace_core import WorkspaceCore


class SurfacesMixin(WorkspaceCore):
    """Home tabs, one per person, replaced whole by each publish; and thread statuses."""

    def publish_home(self, user_id: str, view: object, *, hash: str | None = None) -> View:
        """Replace ``user_id``'s Home tab with ``view`` (see ``views.publish`` for the errors)."""
        if isinstance(view, dict) and len(json.dumps(view)) > MAX_VIEW_BYTES:
            raise WorkspaceError("view_too_large")
        errors = validate_home(view)
        if errors:
            raise WorkspaceError("invalid_arguments", errors)
        assert isinstance(view, dict)
        with self._lock:
            if self.user(user_id) is None:
                raise WorkspaceError("user_not_found")
            if not self.home_tab_enabled:
                raise WorkspaceError("not_enabled")
            current = self._homes.get(user_id)
            if hash and current is not None and current.hash != hash:
                raise WorkspaceError("hash_conflict")
            published = self._home_locked(user_id, view, current)
            self._homes[user_id] = published
            event = self._event_locked("home_published", published)
        self._deliver(event)
        return published

    def home(self, user_id: str) -> View | None:
        """Return ``user_id``'s Home tab as last published (None if never)."""
        with self._lock:
            return self._homes.get(user_id)

    def set_thread_status(self, channel_id: str, thread_ts: str, status: str) -> None:
        """Show ``status`` under the thread (an empty status clears it)."""
        with self._lock:
            channel = self.channel(channel_id)
            if channel is None:
                raise WorkspaceError("channel_not_found")
            key = (channel_id, thread_ts)
            if status:
                self._thread_statuses[key] = status
            else:
                self._thread_statuses.pop(key, None)
            event = self._event_locked("thread_status_set", channel)
        self._deliver(event)

    def thread_status(self, channel_id: str, thread_ts: str) -> str:
        """Return the status shown under the thread ("" if none)."""
        with self._lock:
            return self._thread_statuses.get((channel_id, thread_ts), "")

    def _home_locked(self, user_id: str, view: JsonObject, current: View | None) -> View:
        view_id = current.id if current else self._new_id("V")
        hash_ = f"{int(self._clock())}.{secrets.token_hex(4)}"
        payload = copy.deepcopy(view) | {
            "id": view_id,
            "team_id": self.team_id,
            "hash": hash_,
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "external_id": view.get("external_id", ""),
            "state": {"values": {}},
            "root_view_id": view_id,
            "previous_view_id": None,
            "app_id": self.app_id,
            "bot_id": self.bot_id,
        }
        return View(
            id=view_id,
            trigger_id="",
            user=user_id,
            view=payload,
            hash=hash_,
            private_metadata=payload["private_metadata"],
            external_id=payload["external_id"] or None,
            root_view_id=view_id,
            previous_view_id=None,
        )
