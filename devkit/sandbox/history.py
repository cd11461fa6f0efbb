"""``conversations.history`` and ``conversations.replies`` over the sandbox workspace.

As Slack answers them: history newest first (top-level messages and broadcast replies),
replies with the parent first and then the thread oldest first; ``oldest``/``latest``
bounds (exclusive unless ``inclusive``), ``limit`` and an opaque ``cursor`` for the next
page; message ``metadata`` only with ``include_all_metadata``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from devkit.sandbox.records import JsonObject, Message, WorkspaceError
from devkit.sandbox.workspace import Workspace

DEFAULT_LIMIT = 100
MAX_LIMIT = 999


def conversations_history(ws: Workspace, params: Mapping[str, Any]) -> JsonObject:
    """Answer ``conversations.history``: the channel's messages, newest first."""
    channel = _channel(ws, params)
    found = [m for m in reversed(ws.messages(channel)) if _within(m, params)]
    return _page(ws, found, params)


def conversations_replies(ws: Workspace, params: Mapping[str, Any]) -> JsonObject:
    """Answer ``conversations.replies``: the parent, then its replies oldest first."""
    channel = _channel(ws, params)
    ts = str(params.get("ts") or "")
    if not ts:
        raise WorkspaceError("invalid_arguments", ["[ERROR] missing required field: ts"])
    thread = ws.thread(channel, ts)
    if not thread:
        raise WorkspaceError("thread_not_found")
    parent, replies = thread[0], thread[1:]
    return _page(ws, [parent, *(m for m in replies if _within(m, params))], params)


def _channel(ws: Workspace, params: Mapping[str, Any]) -> str:
    channel = str(params.get("channel") or "")
    if not channel or ws.channel(channel) is None:
        raise WorkspaceError("channel_not_found")
    return channel


def _within(message: Message, params: Mapping[str, Any]) -> bool:
    inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")
    ts = float(message.ts)
    oldest, latest = params.get("oldest"), params.get("latest")
    if oldest not in (None, "") and (ts < float(oldest) or (ts == float(oldest) and not inclusive)):
        return False
    return latest in (None, "") or ts < float(latest) or (ts == float(latest) and inclusive)


def _page(ws: Workspace, messages: list[Message], params: Mapping[str, Any]) -> JsonObject:
    limit = min(max(int(params.get("limit") or DEFAULT_LIMIT), 1), MAX_LIMIT)
    start = _offset(params.get("cursor"))
    shown = messages[start : start + limit]
    more = start + limit < len(messages)
    metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
    return {
        "messages": [
            m.to_api(team_id=ws.team_id, app_id=ws.app_id, include_metadata=metadata) for m in shown
        ],
        "has_more": more,
        "response_metadata": {"next_cursor": _cursor(start + limit) if more else ""},
    }


def _cursor(offset: int) -> str:
    return base64.b64encode(f"next_ts:{offset}".encode()).decode()


def _offset(cursor: Any) -> int:
    if not cursor:
        return 0
    try:
        return int(base64.b64decode(str(cursor)).decode().removeprefix("next_ts:"))
    except ValueError:
        raise WorkspaceError("invalid_cursor") from None
