"""The requests Slack sends to an app, shaped as Slack shapes them.

A slash command is a form body; a click (``block_actions``), a modal submission
(``view_submission``) and a closed modal (``view_closed``) are a form body with one field,
``payload``, holding JSON. These functions build the decoded content; ``devkit.sandbox.app_link``
encodes, signs and sends it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devkit.sandbox.records import EphemeralMessage, JsonObject, Message, User, View, WorkspaceError
from devkit.sandbox.workspace import Workspace

VERIFICATION_TOKEN = "sandbox-verification-token"  # noqa: S105 - deprecated by Slack, still sent
TEXT_INPUTS = frozenset({"plain_text_input", "email_text_input", "url_text_input", "number_input"})
InMessage = Message | EphemeralMessage
"""A message a button can be clicked in: one in a channel, or an ephemeral one."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an interaction happened: the person, and the conversation (or modal)."""

    user: User
    channel_id: str | None = None
    thread_ts: str | None = None


def _user_json(ws: Workspace, user: User) -> JsonObject:
    return {"id": user.id, "username": user.name, "name": user.name, "team_id": ws.team_id}


def _team_json(ws: Workspace) -> JsonObject:
    return {"id": ws.team_id, "domain": ws.domain}


def _channel_json(ws: Workspace, channel_id: str) -> JsonObject:
    channel = ws.channel(channel_id)
    if channel is None:
        raise WorkspaceError("channel_not_found")
    return {"id": channel.id, "name": "directmessage" if channel.is_im else channel.name}


def slash_command_form(
    ws: Workspace, origin: Origin, command: str, text: str, *, trigger_id: str, response_url: str
) -> dict[str, str]:
    """The form fields of a slash command, as Slack posts them."""
    assert origin.channel_id is not None
    channel = _channel_json(ws, origin.channel_id)
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": ws.team_id,
        "team_domain": ws.domain,
        "channel_id": channel["id"],
        "channel_name": channel["name"],
        "user_id": origin.user.id,
        "user_name": origin.user.name,
        "command": command,
        "text": text,
        "api_app_id": ws.app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }


def find_element(
    blocks: list[JsonObject] | None, block_id: str | None, action_id: str
) -> tuple[JsonObject, str] | None:
    """Find an interactive element by ``action_id`` (and ``block_id`` when given).

    Returns the element and its block's id (Slack makes one up when a block has none).
    """
    for index, block in enumerate(blocks or []):
        found_id = str(block.get("block_id") or f"b{index}")
        if block_id is not None and found_id != block_id:
            continue
        candidates = list(block.get("elements") or [])
        if isinstance(block.get("accessory"), dict):
            candidates.append(block["accessory"])
        for element in candidates:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return element, found_id
    return None


def _action_json(element: JsonObject, block_id: str, action_ts: str) -> JsonObject:
    action: JsonObject = {
        "action_id": element.get("action_id"),
        "block_id": block_id,
        "type": element.get("type"),
        "action_ts": action_ts,
    }
    for key in ("text", "value", "style", "url"):
        if element.get(key) is not None:
            action[key] = copy.deepcopy(element[key])
    return action


def message_action_payload(
    ws: Workspace,
    origin: Origin,
    message: InMessage,
    element: JsonObject,
    block_id: str,
    *,
    trigger_id: str,
    response_url: str,
    action_ts: str,
) -> JsonObject:
    """A ``block_actions`` payload for a button clicked in a message, ephemeral or not.

    For an ephemeral message the container says ``is_ephemeral`` and there is no ``message``
    field: Slack does not send an ephemeral message's content back to the app.
    """
    ephemeral = isinstance(message, EphemeralMessage)
    container: JsonObject = {
        "type": "message",
        "message_ts": _ts_of(message),
        "channel_id": message.channel,
        "is_ephemeral": ephemeral,
    }
    if message.thread_ts is not None:
        container["thread_ts"] = message.thread_ts
    content = (
        {}
        if isinstance(message, EphemeralMessage)
        else {"message": message.to_api(team_id=ws.team_id, app_id=ws.app_id)}
    )
    return {
        "type": "block_actions",
        "user": _user_json(ws, origin.user),
        "api_app_id": ws.app_id,
        "token": VERIFICATION_TOKEN,
        "container": container,
        "trigger_id": trigger_id,
        "team": _team_json(ws),
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": _channel_json(ws, message.channel),
        **content,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [_action_json(element, block_id, action_ts)],
    }


def _ts_of(message: InMessage) -> str:
    return message.message_ts if isinstance(message, EphemeralMessage) else message.ts


def view_action_payload(
    ws: Workspace,
    origin: Origin,
    view: View,
    element: JsonObject,
    block_id: str,
    values: Mapping[str, Mapping[str, str]],
    *,
    trigger_id: str,
    action_ts: str,
) -> JsonObject:
    """A ``block_actions`` payload for a button clicked in a modal."""
    return {
        "type": "block_actions",
        "user": _user_json(ws, origin.user),
        "api_app_id": ws.app_id,
        "token": VERIFICATION_TOKEN,
        "container": {"type": "view", "view_id": view.id},
        "trigger_id": trigger_id,
        "team": _team_json(ws),
        "enterprise": None,
        "is_enterprise_install": False,
        "view": view_with_state(view, values),
        "actions": [_action_json(element, block_id, action_ts)],
    }


def view_submission_payload(
    ws: Workspace,
    origin: Origin,
    view: View,
    values: Mapping[str, Mapping[str, str]],
    *,
    trigger_id: str,
) -> JsonObject:
    """A ``view_submission`` payload: the modal with what the person typed in ``state``."""
    return {
        "type": "view_submission",
        "team": _team_json(ws),
        "user": _user_json(ws, origin.user),
        "api_app_id": ws.app_id,
        "token": VERIFICATION_TOKEN,
        "trigger_id": trigger_id,
        "view": view_with_state(view, values),
        "response_urls": [],
        "enterprise": None,
        "is_enterprise_install": False,
    }


def view_closed_payload(ws: Workspace, origin: Origin, view: View) -> JsonObject:
    """A ``view_closed`` payload (sent only for modals opened with ``notify_on_close``)."""
    return {
        "type": "view_closed",
        "team": _team_json(ws),
        "user": _user_json(ws, origin.user),
        "api_app_id": ws.app_id,
        "token": VERIFICATION_TOKEN,
        "view": view_with_state(view, {}),
        "is_cleared": False,
        "is_enterprise_install": False,
    }


def view_with_state(view: View, values: Mapping[str, Mapping[str, str]]) -> JsonObject:
    """The view payload with ``state.values`` filled from the inputs' current values.

    ``values`` maps block_id to action_id to the typed text; inputs the person did not touch
    carry their ``initial_value``, and an empty input is ``null``, as in Slack.
    """
    payload = copy.deepcopy(view.view)
    state: dict[str, dict[str, Any]] = {}
    for block in payload.get("blocks") or []:
        element = block.get("element") if block.get("type") == "input" else None
        if not isinstance(element, dict) or element.get("type") not in TEXT_INPUTS:
            continue
        block_id = str(block.get("block_id", ""))
        action_id = str(element.get("action_id", ""))
        typed = (values.get(block_id) or {}).get(action_id)
        text = typed if typed is not None else element.get("initial_value")
        state.setdefault(block_id, {})[action_id] = {"type": element["type"], "value": text or None}
    payload["state"] = {"values": state}
    return payload
