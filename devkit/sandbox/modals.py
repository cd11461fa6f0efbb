"""Modals in the sandbox workspace: trigger ids, and views opened, pushed, updated, closed."""

from __future__ import annotations

import copy
import json
import secrets
from dataclasses import replace
from typing import cast

from devkit.sandbox.blockkit import validate_modal
from devkit.sandbox.records import JsonObject, Trigger, View, WorkspaceError
from devkit.sandbox.workspace_core import WorkspaceCore

MAX_VIEW_BYTES = 250_000
MAX_VIEW_STACK = 3


class ModalsMixin(WorkspaceCore):
    """The workspace's modals: single-use trigger ids and stacks of up to three views."""

    def issue_trigger(self, user: str | None = None, *, view_id: str | None = None) -> str:
        """Issue a single-use ``trigger_id``, as Slack does for a click or a slash command.

        ``view_id`` names the modal the interaction happened in (``views.push`` stacks on it).
        The trigger expires ``trigger_ttl`` seconds after it was issued.
        """
        with self._lock:
            trigger_id = f"{int(self._clock())}.{next(self._ids)}.{secrets.token_hex(16)}"
            self._triggers[trigger_id] = Trigger(trigger_id, user, self._clock(), view_id)
            return trigger_id

    def open_view(self, trigger_id: str, view: JsonObject) -> View:
        """Open a modal by exchanging a trigger (see ``views.open`` for the errors)."""
        checked = _check_view(view)
        with self._lock:
            trigger = self._exchange_locked(trigger_id)
            new = self._new_view_locked(checked, trigger, root=None, previous=None)
            event = self._event_locked("view_opened", new)
        self._deliver(event)
        return new

    def push_view(self, trigger_id: str, view: JsonObject) -> View:
        """Push a modal on the stack the trigger came from (at most three views deep)."""
        checked = _check_view(view)
        with self._lock:
            top = self._stack_top_locked(self._check_trigger_locked(trigger_id))
            if top is None:
                raise WorkspaceError("not_found")
            stack = [
                v for v in self._views.values() if v.root_view_id == top.root_view_id and v.is_open
            ]
            if len(stack) >= MAX_VIEW_STACK:
                raise WorkspaceError("push_limit_reached")
            trigger = self._exchange_locked(trigger_id)
            if trigger.user is None:
                trigger = replace(trigger, user=top.user)
            new = self._new_view_locked(checked, trigger, root=top.root_view_id, previous=top.id)
            event = self._event_locked("view_pushed", new)
        self._deliver(event)
        return new

    def update_view(
        self,
        view: JsonObject,
        *,
        view_id: str | None = None,
        external_id: str | None = None,
        hash: str | None = None,
    ) -> View:
        """Replace an open modal's content; a stale ``hash`` is ``hash_conflict``."""
        checked = _check_view(view)
        with self._lock:
            old = self._find_view_locked(view_id, external_id)
            if hash is not None and hash != old.hash:
                raise WorkspaceError("hash_conflict")
            new_external = checked.get("external_id") or old.external_id
            if new_external != old.external_id:
                self._check_external_id_locked(new_external)
            new_hash = self._new_hash()
            payload = self._view_payload(
                checked,
                view_id=old.id,
                hash_=new_hash,
                external_id=new_external,
                root=old.root_view_id,
                previous=old.previous_view_id,
            )
            new = replace(
                old,
                view=payload,
                hash=new_hash,
                private_metadata=payload["private_metadata"],
                external_id=new_external,
                updates=(*old.updates, checked),
            )
            self._views[old.id] = new
            event = self._event_locked("view_updated", new)
        self._deliver(event)
        return new

    def close_view(self, view_id: str, *, clear: bool = False) -> View:
        """Close a modal (the sandbox's Cancel/Submit); ``clear`` closes its whole stack."""
        with self._lock:
            target = self._views.get(view_id)
            if target is None:
                raise WorkspaceError("not_found")
            closing = [
                v
                for v in self._views.values()
                if v.is_open
                and (v.id == view_id or (clear and v.root_view_id == target.root_view_id))
            ]
            events = []
            for view in closing:
                self._views[view.id] = replace(view, is_open=False)
                events.append(self._event_locked("view_closed", self._views[view.id]))
            closed = self._views[view_id]
        for event in events:
            self._deliver(event)
        return closed

    def view(self, view_id: str) -> View | None:
        """Return the modal with this id, if any."""
        with self._lock:
            return self._views.get(view_id)

    def views(self, *, open_only: bool = False) -> list[View]:
        """Return the modals, in the order they were opened."""
        with self._lock:
            return [v for v in self._views.values() if v.is_open or not open_only]

    def _check_trigger_locked(self, trigger_id: str) -> Trigger:
        trigger = self._triggers.get(trigger_id)
        if trigger is None:
            raise WorkspaceError("invalid_trigger_id")
        if trigger.used:
            raise WorkspaceError("exchanged_trigger_id")
        if self._clock() - trigger.issued_at > self.trigger_ttl:
            raise WorkspaceError("expired_trigger_id")
        return trigger

    def _exchange_locked(self, trigger_id: str) -> Trigger:
        used = replace(self._check_trigger_locked(trigger_id), used=True)
        self._triggers[trigger_id] = used
        return used

    def _stack_top_locked(self, trigger: Trigger) -> View | None:
        origin = self._views.get(trigger.view_id) if trigger.view_id else None
        candidates = [
            v
            for v in self._views.values()
            if v.is_open
            and (
                (origin is not None and v.root_view_id == origin.root_view_id)
                or (origin is None and trigger.user is not None and v.user == trigger.user)
            )
        ]
        return candidates[-1] if candidates else None

    def _find_view_locked(self, view_id: str | None, external_id: str | None) -> View:
        if view_id is None and external_id is None:
            raise WorkspaceError(
                "invalid_arguments", ["[ERROR] either view_id or external_id is required"]
            )
        for view in self._views.values():
            if view.is_open and (
                (view_id is not None and view.id == view_id)
                or (view_id is None and view.external_id == external_id)
            ):
                return view
        raise WorkspaceError("not_found")

    def _check_external_id_locked(self, external_id: str | None) -> None:
        if external_id and any(v.external_id == external_id for v in self._views.values()):
            raise WorkspaceError("duplicate_external_id")

    def _new_view_locked(
        self, view: JsonObject, trigger: Trigger, *, root: str | None, previous: str | None
    ) -> View:
        external_id = view.get("external_id") or None
        self._check_external_id_locked(external_id)
        view_id = self._new_id("V")
        hash_ = self._new_hash()
        payload = self._view_payload(
            view,
            view_id=view_id,
            hash_=hash_,
            external_id=external_id,
            root=root or view_id,
            previous=previous,
        )
        new = View(
            id=view_id,
            trigger_id=trigger.id,
            user=trigger.user,
            view=payload,
            hash=hash_,
            private_metadata=payload["private_metadata"],
            external_id=external_id,
            root_view_id=root or view_id,
            previous_view_id=previous,
        )
        self._views[view_id] = new
        return new

    def _view_payload(
        self,
        view: JsonObject,
        *,
        view_id: str,
        hash_: str,
        external_id: str | None,
        root: str,
        previous: str | None,
    ) -> JsonObject:
        payload = copy.deepcopy(view)
        payload.update(
            id=view_id,
            team_id=self.team_id,
            private_metadata=view.get("private_metadata", ""),
            callback_id=view.get("callback_id", ""),
            external_id=external_id or "",
            state={"values": {}},
            hash=hash_,
            clear_on_close=bool(view.get("clear_on_close", False)),
            notify_on_close=bool(view.get("notify_on_close", False)),
            root_view_id=root,
            previous_view_id=previous,
            app_id=self.app_id,
            bot_id=self.bot_id,
        )
        payload.setdefault("submit", None)
        payload.setdefault("close", None)
        return payload

    def _new_hash(self) -> str:
        return f"{int(self._clock())}.{secrets.token_hex(4)}"


def _check_view(view: object) -> JsonObject:
    if isinstance(view, dict) and len(json.dumps(view)) > MAX_VIEW_BYTES:
        raise WorkspaceError("view_too_large")
    errors = validate_modal(view)
    if errors:
        raise WorkspaceError("invalid_arguments", errors)
    return cast(JsonObject, view)
