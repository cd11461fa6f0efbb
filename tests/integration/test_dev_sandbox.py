"""The sandbox behind ``signoff dev``, without a browser: signed requests, acks, the page's API."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlencode

import pytest

from agent_runtime import RunId
from devkit.dev import DevOptions, DevStack, start_dev
from devkit.sandbox.app_link import AppLink
from devkit.sandbox.records import EphemeralMessage, Message
from devkit.sandbox.signing import signed_headers, verify
from devkit.sandbox.workspace import Workspace

SECRET = "test-signing-secret"
TASK = "/agent refund order 1042 and email the customer"
RELAYED = ("content-type", "x-slack-signature", "x-slack-request-timestamp")
WAIT_S = 15.0
M = TypeVar("M", Message, EphemeralMessage)
Recorded = list[tuple[dict[str, str], bytes]]
"""Requests a request URL received: headers and body."""
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[DevStack]:
    """``signoff dev``'s parts in this process on free ports (the worker is a child process)."""
    running = start_dev(
        DevOptions(port=0, data_dir=tmp_path / "dev", concurrency=1), dict(os.environ)
    )
    try:
        yield running
    finally:
        running.stop()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with OPENER.open(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _ui(
    stack: DevStack, action: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    status, data = _post(
        stack.url + "ui/" + action,
        json.dumps(body).encode(),
        headers or {"Content-Type": "application/json"},
    )
    return status, json.loads(data)


def _command_form(stack: DevStack, text: str) -> bytes:
    channel = stack.workspace.channels()[0].id
    return urlencode(
        {
            "command": "/agent",
            "text": text,
            "user_id": "U_RITA",
            "user_name": "rita",
            "team_id": stack.workspace.team_id,
            "channel_id": channel,
            "trigger_id": "1.2.3",
        }
    ).encode()


def test_the_app_answers_only_requests_signed_with_the_sessions_secret(stack: DevStack) -> None:
    """Bolt refuses a wrong signature with 401 and acks a correctly signed slash command."""
    body = _command_form(stack, "help")
    forged = signed_headers(
        "not-the-secret", body, content_type="application/x-www-form-urlencoded"
    )
    assert _post(stack.app.request_url, body, forged)[0] == 401
    good = signed_headers(
        stack.settings.slack_signing_secret, body, content_type="application/x-www-form-urlencoded"
    )
    status, answer = _post(stack.app.request_url, body, good)
    assert status == 200
    assert json.loads(answer)["response_type"] == "ephemeral"
    assert "/agent status" in json.loads(answer)["text"]


def test_a_slash_commands_ack_body_is_shown_as_an_ephemeral_message(stack: DevStack) -> None:
    """/agent help: the HTTP answer becomes an ephemeral for the typist; no Web API call made."""
    channel = stack.workspace.channels()[0].id
    status, answer = _ui(
        stack, "command", {"user": "U_DANA", "channel": channel, "text": "/agent help"}
    )
    assert (status, answer["ok"]) == (200, True)
    shown = stack.workspace.ephemerals(user="U_DANA")
    assert len(shown) == 1
    assert "/agent history RUN" in shown[0].text
    assert stack.workspace.ephemerals(user="U_RITA") == []
    assert not stack.workspace.calls("chat.postEphemeral")
    assert not stack.workspace.messages(channel)


def test_an_unknown_slash_command_is_refused_by_the_sandbox(stack: DevStack) -> None:
    """A command the app did not declare never reaches it; Slack's words, only to the typist."""
    channel = stack.workspace.channels()[0].id
    _, answer = _ui(stack, "command", {"user": "U_EVE", "channel": channel, "text": "/deploy"})
    assert answer == {"ok": False, "error": "unknown_command"}
    assert "is not a valid command" in stack.workspace.ephemerals(user="U_EVE")[0].text


def test_the_pages_api_takes_json_from_the_page_only(stack: DevStack) -> None:
    """Forms, other origins and other host names are refused: no cross-site or rebinding use."""
    channel = stack.workspace.channels()[0].id
    body = {"user": "U_RITA", "channel": channel, "text": "/agent help"}
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert _ui(stack, "command", body, form)[0] == 403
    other = {"Content-Type": "application/json", "Origin": "http://evil.example"}
    assert _ui(stack, "command", body, other)[0] == 403
    rebound = {"Content-Type": "application/json", "Host": "evil.example"}
    assert _ui(stack, "command", body, rebound)[0] == 403
    assert _ui(stack, "command", body | {"user": "U_NOBODY"})[1]["error"] == "user_not_found"
    assert stack.workspace.ephemerals() == []


class _Recorder(BaseHTTPRequestHandler):
    """Keeps each request; passes it on to ``server.target`` if set, else answers 200."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        server: Any = self.server
        body = self.rfile.read(length)
        server.recorded.append((dict(self.headers.items()), body))
        status, answer = 200, b""
        if server.target is not None:
            passed = {k: v for k, v in self.headers.items() if k.lower() in RELAYED}
            status, answer = _post(server.target, body, passed)
        self.send_response(status)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _recorder(target: str | None = None) -> Iterator[tuple[str, Recorded]]:
    """A loopback request URL keeping what it receives (and relaying it to ``target``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    recorded: Recorded = []
    server.recorded, server.target = recorded, target  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/slack/events", recorded
    finally:
        server.shutdown()
        server.server_close()


def test_a_click_reaches_the_app_as_a_signed_block_actions_payload() -> None:
    """Signed, shaped as Slack's; its trigger_id opens a modal; its response_url works 5 times."""
    workspace = Workspace()
    workspace.add_user("dana", user_id="U_DANA")
    channel = workspace.channels()[0].id
    root = workspace.post_message(channel, text="root")
    card = workspace.post_message(
        channel,
        text="card",
        thread_ts=root.ts,
        blocks=[
            {
                "type": "actions",
                "block_id": "approval:A1",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "approval.approve",
                        "value": "A1",
                        "text": {"type": "plain_text", "text": "Approve"},
                        "style": "primary",
                    }
                ],
            }
        ],
    )
    with _recorder() as (request_url, recorded):
        link = AppLink(
            workspace,
            request_url=request_url,
            signing_secret=SECRET,
            response_url_base="http://127.0.0.1:9/slack/response",
        )
        assert link.click(
            "U_DANA", channel_id=channel, message_ts=card.ts, action_id="approval.approve"
        ).ok
    [(headers, body)] = recorded
    assert verify(
        SECRET,
        headers["X-Slack-Request-Timestamp"],
        body,
        headers["X-Slack-Signature"],
        now=time.time(),
    )
    payload = json.loads(parse_qs(body.decode())["payload"][0])
    assert payload["type"] == "block_actions"
    assert payload["user"]["id"] == "U_DANA"
    assert payload["container"] == {
        "type": "message",
        "message_ts": card.ts,
        "channel_id": channel,
        "is_ephemeral": False,
        "thread_ts": root.ts,
    }
    assert payload["actions"][0] | {"action_ts": "x"} == {
        "action_id": "approval.approve",
        "block_id": "approval:A1",
        "type": "button",
        "value": "A1",
        "style": "primary",
        "action_ts": "x",
        "text": {"type": "plain_text", "text": "Approve"},
    }
    view = {"type": "modal", "title": {"type": "plain_text", "text": "Hi"}, "blocks": []}
    assert workspace.open_view(payload["trigger_id"], view).user == "U_DANA"
    token = payload["response_url"].rsplit("/", 1)[1]
    for _ in range(5):
        assert link.respond(token, {"text": "Noted."}) == (200, {"ok": True})
    assert link.respond(token, {"text": "Once more"}) == (
        404,
        {"ok": False, "error": "expired_url"},
    )
    shown = workspace.ephemerals(user="U_DANA")
    assert [(e.text, e.thread_ts) for e in shown] == [("Noted.", root.ts)] * 5


def test_reset_forgets_the_sessions_runs_and_nothing_else(tmp_path: Path) -> None:
    """--reset deletes the database, ledger, Slack messages and log it made; other files stay."""
    options = DevOptions(port=0, data_dir=tmp_path / "dev", concurrency=1)
    first = start_dev(options, dict(os.environ))
    try:
        first.services.runtime.start("agent:demo", {"task": "help", "requester": {"user_id": "U"}})
        first.workspace.post_message("general", text="kept until --reset")
    finally:
        first.stop()
    (options.data_dir / "notes.txt").write_text("mine")
    again = start_dev(DevOptions(port=0, data_dir=options.data_dir, reset=True), dict(os.environ))
    try:
        assert again.services.runtime.runs() == []
        assert again.workspace.messages(again.workspace.resolve_channel("general").id) == []
    finally:
        again.stop()
    assert (options.data_dir / "notes.txt").read_text() == "mine"


def _with_button(messages: Sequence[M], action_id: str) -> list[M]:
    """The messages that have a button with this ``action_id``."""
    return [m for m in messages if f'"action_id": "{action_id}"' in json.dumps(m.blocks)]


def _payloads(recorded: Recorded) -> list[dict[str, Any]]:
    """The interaction payloads among recorded requests (slash commands left out)."""
    forms = [parse_qs(body.decode()) for _, body in recorded]
    return [json.loads(form["payload"][0]) for form in forms if "payload" in form]


def _rita_opens_a_history(stack: DevStack, channel: str) -> tuple[RunId, EphemeralMessage]:
    """Rita starts a run and clicks History on its root once the model asked for the refund."""
    ws = stack.workspace
    assert _ui(stack, "command", {"user": "U_RITA", "channel": channel, "text": TASK})[1]["ok"]
    # the run is created just after the command's ack
    assert ws.wait_for(lambda: bool(stack.services.runtime.runs()), WAIT_S)
    run_id = stack.services.runtime.runs()[0].id
    assert ws.wait_for(lambda: bool(_with_button(ws.messages(channel), "run.history")), WAIT_S)
    (root,) = _with_button(ws.messages(channel), "run.history")
    assert ws.wait_for(
        lambda: len(_with_button(ws.thread(channel, root.ts), "approval.approve")) == 1, WAIT_S
    )
    assert _ui(
        stack,
        "click",
        {"user": "U_RITA", "channel": channel, "ts": root.ts, "action_id": "run.history"},
    )[1]["ok"]
    assert ws.wait_for(
        lambda: bool(_with_button(ws.ephemerals(channel, "U_RITA"), "run.fork")), WAIT_S
    )
    (history,) = _with_button(ws.ephemerals(channel, "U_RITA"), "run.fork")
    return run_id, history


def test_fork_from_here_on_the_ephemeral_history_forks_the_run(stack: DevStack) -> None:
    """The history's button reaches the app as Slack sends it and forks; others may not click."""
    ws, runtime = stack.workspace, stack.services.runtime
    channel = ws.channels()[0].id
    assert stack.web.ui is not None
    with _recorder(stack.app.request_url) as (relay_url, recorded):
        stack.web.ui.link.request_url = relay_url  # the app gets the same requests, kept
        run_id, history = _rita_opens_a_history(stack, channel)
        fork_block = [b for b in history.blocks or [] if "accessory" in b][-1]["block_id"]
        click = {
            "user": "U_EVE",
            "channel": channel,
            "ts": history.message_ts,
            "action_id": "run.fork",
            "block_id": fork_block,
            "ephemeral": True,
        }
        assert _ui(stack, "click", click) == (
            400,
            {"ok": False, "error": "ephemeral_of_another_user"},
        )
        unknown = click | {"user": "U_RITA", "ts": "1700000000.000001"}
        assert _ui(stack, "click", unknown) == (400, {"ok": False, "error": "message_not_found"})
        assert _ui(stack, "click", click | {"user": "U_RITA"})[1]["ok"]
        assert ws.wait_for(
            lambda: "Forked run" in ws.ephemerals(channel, "U_RITA")[-1].text, WAIT_S
        )
    (fork,) = runtime.forks(run_id)
    assert fork.fork_at == int(fork_block.removeprefix("fork:"))
    history_click, fork_click = _payloads(recorded)  # neither refused click reached the app
    # A click on a channel message carries the message; one on an ephemeral does not.
    assert history_click["container"]["is_ephemeral"] is False
    assert history_click["message"]["ts"] == history_click["container"]["message_ts"]
    assert fork_click["container"] == {
        "type": "message",
        "message_ts": history.message_ts,
        "channel_id": channel,
        "is_ephemeral": True,
    }
    assert "message" not in fork_click
    assert (fork_click["user"]["id"], fork_click["channel"]["id"]) == ("U_RITA", channel)
    assert fork_click["actions"][0]["value"] == f"{run_id}:{fork.fork_at}"
