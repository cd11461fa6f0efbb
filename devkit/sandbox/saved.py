"""The sandbox workspace kept in a JSON file, so a restarted sandbox shows the same Slack.

``load_workspace`` reads the file (a fresh workspace when there is none); ``keep_saved``
rewrites it after every change, atomically (a temporary file renamed over it), so a
process killed mid-write leaves the previous version.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devkit.sandbox.records import (
    Channel,
    EphemeralMessage,
    JsonObject,
    Message,
    MessageRevision,
    SavedState,
    User,
    WorkspaceEvent,
)
from devkit.sandbox.workspace import Workspace

UNSAVED = frozenset({"api_call"})
"""Events that change nothing a restart keeps."""


def load_workspace(path: Path) -> Workspace:
    """Return the workspace saved in ``path``, or a fresh one if there is no such file."""
    workspace = Workspace()
    if path.exists():
        workspace.restore(state_from_json(json.loads(path.read_text(encoding="utf-8"))))
    return workspace


def save_workspace(workspace: Workspace, path: Path) -> None:
    """Write the workspace's saved state to ``path`` atomically."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(state_to_json(workspace.saved_state())), encoding="utf-8")
    os.replace(temporary, path)


def keep_saved(workspace: Workspace, path: Path) -> Callable[[], None]:
    """Save the workspace to ``path`` after each change; return what stops it (saving once more)."""
    lock = threading.Lock()

    def save(event: WorkspaceEvent | None = None) -> None:
        if event is None or event.kind not in UNSAVED:
            with lock:  # one writer at a time, each with a state at least as new as the last
                save_workspace(workspace, path)

    unsubscribe = workspace.subscribe(save)

    def stop() -> None:
        unsubscribe()
        save()

    return stop


def state_to_json(state: SavedState) -> JsonObject:
    """Return ``state`` as a JSON object."""
    return dataclasses.asdict(state)


def state_from_json(data: JsonObject) -> SavedState:
    """Read back the object ``state_to_json`` returns."""
    return SavedState(
        users=[User(**u) for u in data["users"]],
        channels=[Channel(**c) for c in data["channels"]],
        bot_channels=list(data["bot_channels"]),
        archived=list(data["archived"]),
        messages=[_message(m) for m in data["messages"]],
        ephemerals=[EphemeralMessage(**e) for e in data["ephemerals"]],
        next_id=int(data["next_id"]),
        last_ts_us=int(data["last_ts_us"]),
    )


def _message(data: dict[str, Any]) -> Message:
    edits = tuple(MessageRevision(**e) for e in data.get("edits", ()))
    return Message(**(data | {"edits": edits}))
