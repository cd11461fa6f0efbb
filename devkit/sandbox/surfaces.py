"""The app's other surfaces in the sandbox workspace: each person's Home tab and the status
line of a thread (``views.publish`` and ``assistant.threads.setStatus``)."""

from __future__ import annotations

import copy
import json
import secrets

from devkit.sandbox.blockkit import validate_home
from devkit.sandbox.modals import MAX_VIEW_BYTES
from devkit.sandbox.records import JsonObject, WorkspaceError
from devkit.sandbox.workspace_core import WorkspaceCore


class SurfacesMixin(WorkspaceCore):
    """Home tabs, one per person, replaced whole by each publish; and thread statuses."""

    def publish_home(self, user_id: str, view: object, *, hash: str | None = None) -> JsonObject:
        """Replace ``user_id``'s Home tab with ``view`` (see ``views.publish`` for the errors);
        return it as the API does."""
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
            if hash and current is not None and current["hash"] != hash:
                raise WorkspaceError("hash_conflict")
            view_id = current["id"] if current else self._new_id("V")
            published = copy.deepcopy(view) | {
                "id": view_id,
                "team_id": self.team_id,
                "hash": f"{int(self._clock())}.{secrets.token_hex(4)}",
                "private_metadata": view.get("private_metadata", ""),
                "callback_id": view.get("callback_id", ""),
                "external_id": view.get("external_id", ""),
                "state": {"values": {}},
                "root_view_id": view_id,
                "previous_view_id": None,
                "app_id": self.app_id,
                "bot_id": self.bot_id,
            }
            self._homes[user_id] = published
            self._changed.notify_all()
        return copy.deepcopy(published)

    def home(self, user_id: str) -> JsonObject | None:
        """Return ``user_id``'s Home tab as last published (None if never)."""
        with self._lock:
            found = self._homes.get(user_id)
            return None if found is None else copy.deepcopy(found)

    def set_thread_status(self, channel_id: str, thread_ts: str, status: str) -> None:
        """Show ``status`` under the thread (an empty status clears it)."""
        with self._lock:
            if self.channel(channel_id) is None:
                raise WorkspaceError("channel_not_found")
            key = (channel_id, thread_ts)
            if status:
                self._thread_statuses[key] = status
            else:
                self._thread_statuses.pop(key, None)
            self._changed.notify_all()

    def thread_status(self, channel_id: str, thread_ts: str) -> str:
        """Return the status shown under the thread ("" if none)."""
        with self._lock:
            return self._thread_statuses.get((channel_id, thread_ts), "")
