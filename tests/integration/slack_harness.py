"""A harness for Slack scenario tests: the real Bolt app over WSGI, a fake Slack, real databases.

``SlackWorld`` owns everything one scenario needs and stops it all on exit:

- the demo payment provider on loopback (its ledger is where refunds really land),
- the sandbox Slack Web API on loopback (``devkit.sandbox``), with the people of the scenarios,
- one or more ``BotInstance``\\ s: ``build_services(settings)``, ``web_client(settings)`` pointed
  at the fake, the real Bolt app from ``slack_app`` served by ``wsgi`` under
  ``bot.app.serving`` in a thread on ``127.0.0.1:0``.

Requests reach the app as Slack sends them: form bodies signed with
``v0=HMAC-SHA256(secret, "v0:{ts}:{body}")`` and posted with ``requests``. The worker and the
outbox dispatcher are driven by hand (``work()``, ``drain()``) so every test decides when
agent work and Slack delivery happen.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlencode

import requests
from slack_bolt import App
from slack_sdk import WebClient

from agent_runtime import (
    Approval,
    ApprovalStatus,
    RunId,
    RunNotFound,
    StoreUnavailable,
    WorkerOptions,
)
from bot.app.jobs import dispatcher
from bot.app.server import slack_app, wsgi
from bot.app.serving import serve_wsgi
from bot.app.settings import Settings
from bot.app.slack_mode import web_client
from bot.app.wiring import Services, build_services
from bot.slack.ack_gate import AckGate
from bot.slack.after_ack import AfterAck
from bot.slack.blocks import parse_approval_ref
from bot.slack.dispatcher import Dispatcher
from bot.slack.home import unmarked
from bot.slack.pacing import Pace
from devkit.demo.provider_server import RunningProvider, start_in_thread
from devkit.sandbox.slack_api import (
    DEFAULT_TOKEN,
    ApiCall,
    EphemeralMessage,
    Message,
    RunningSlackApi,
    View,
    Workspace,
    start_slack_api,
)
from tests.integration.slack_readers import find_button, is_card_of

T = TypeVar("T")

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TASK = "refund order 1042 and email the customer"
BATCH_TASK = "refund orders 1042 and 1043"
"""A task whose one model turn proposes two refunds (two approvals asked together)."""
APPROVER, SECOND_APPROVER, REQUESTER, OUTSIDER = "U_DANA", "U_ERIN", "U_REQ", "U_EVE"
PEOPLE = {APPROVER: "dana", SECOND_APPROVER: "erin", REQUESTER: "req", OUTSIDER: "eve"}
"""Slack user ids and user names of the people in every scenario."""
ACK_LIMIT_S = 3.0
"""Slack's limit for the HTTP answer to a command, click or submission."""
HTTP_TIMEOUT_S = 10.0
WAIT_S = 30.0
"""How long ``eventually`` waits by default: work after an ack may wait a second at the gate,
then for a loaded machine's CPU and database; only a failing test waits this long."""
POSTING_METHODS = ("chat.postMessage", "chat.update", "chat.postEphemeral")
FORM = "application/x-www-form-urlencoded"
UNPACED_PACE = Pace(every=timedelta(milliseconds=1), burst=1000)
"""Per-channel pacing lifted, for scenarios that post faster than Slack allows."""
UNPACED = {
    "SIGNOFF_SLACK_POST_INTERVAL_SECONDS": str(UNPACED_PACE.every.total_seconds()),
    "SIGNOFF_SLACK_POST_BURST": str(UNPACED_PACE.burst),
}
"""The settings of ``UNPACED_PACE``."""
NOWHERE = "http://127.0.0.1:9/actions/response"
"""The ``response_url`` of a click unless a test listens on one (nothing listens here)."""


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Return the ``X-Slack-Signature`` Slack computes for ``body`` sent at ``timestamp``."""
    base = f"v0:{timestamp}:".encode() + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def eventually(
    probe: Callable[[], T | None],
    *,
    what: str,
    timeout: float = WAIT_S,
    between: Callable[[], object] | None = None,
) -> T:
    """Call ``between`` then ``probe`` until ``probe`` is truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        if between is not None:
            between()
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.01)


@dataclass(frozen=True)
class Ack:
    """The HTTP answer to a request, and how long Slack would have waited for it."""

    status: int
    body: str
    seconds: float

    def json(self) -> dict[str, Any]:
        """Return the body as JSON (an empty body is ``{}``)."""
        if not self.body:
            return {}
        decoded = json.loads(self.body)
        assert isinstance(decoded, dict)
        return decoded

    @property
    def text(self) -> str:
        """Return the ``text`` of an ephemeral answer."""
        return str(self.json().get("text", ""))


class BotInstance:
    """One Signoff process's Slack front: services, a Web API client, Bolt over WSGI."""

    def __init__(self, world: SlackWorld, settings: Settings, *, migrate: bool) -> None:
        self.world = world
        self.services: Services = build_services(settings, migrate=migrate)
        self.client: WebClient = web_client(settings)
        self.acks = AckGate()
        self._after_acks = AfterAck(self.acks)
        self.app: App = slack_app(self.services, self.client, self._after_acks)
        self.dispatcher: Dispatcher = dispatcher(self.services, self.client)
        self.worker = self.services.runtime.worker(
            WorkerOptions(
                concurrency=4,
                lease_ttl=timedelta(seconds=10),
                poll_interval=timedelta(milliseconds=20),
            )
        )
        self._serving = serve_wsgi(
            wsgi(self.app, acks=self.acks), 0, "127.0.0.1", name="bolt-wsgi", wait_for_requests=True
        )
        self.url = f"http://127.0.0.1:{self._serving.port}/slack/events"
        self._http = requests.Session()
        self._http.trust_env = False  # loopback only: no proxy may capture these requests

    # -- raw requests --------------------------------------------------------------------------

    def post(
        self,
        body: bytes,
        *,
        timestamp: int | None = None,
        secret: str = SIGNING_SECRET,
        signature: str | None = None,
        content_type: str = FORM,
        headers: dict[str, str] | None = None,
        settle: bool = True,
    ) -> Ack:
        """POST ``body`` to ``/slack/events`` signed as Slack signs it (unless told otherwise);
        with ``settle``, wait for the run the answer promises to exist."""
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        sent = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature if signature is not None else sign(secret, stamp, body),
        }
        sent.update(headers or {})
        started = time.monotonic()
        response = self._http.post(self.url, data=body, headers=sent, timeout=HTTP_TIMEOUT_S)
        ack = Ack(response.status_code, response.text, time.monotonic() - started)
        if settle:
            self.wait_started(ack)
        return ack

    def wait_started(self, ack: Ack) -> None:
        """Wait until the run an ack promised (``Started run `…```) exists: the command's
        listener starts it just after the ack."""
        found = re.search(r"Started run `([0-9a-f]{32})`", ack.body)
        if ack.status != 200 or found is None:
            return
        run_id = RunId(found.group(1))

        def exists() -> bool:
            try:
                self.services.runtime.get(run_id)
            except (RunNotFound, StoreUnavailable):  # not yet, or this probe's connection cut
                return False
            return True

        eventually(exists, what=f"run {run_id} to be started", timeout=20.0)

    # -- what Slack sends ----------------------------------------------------------------------

    def command_body(
        self,
        text: str,
        *,
        user: str = REQUESTER,
        channel: str | None = None,
        workspace: Workspace | None = None,
    ) -> bytes:
        """Return the form body of ``/agent text`` typed by ``user`` (in the world's workspace
        unless ``workspace`` is given)."""
        ws = workspace or self.world.workspace
        return urlencode(
            {
                "token": "legacy-verification-token",
                "team_id": ws.team_id,
                "team_domain": ws.domain,
                "channel_id": channel
                or (self.world.channel if workspace is None else ws.resolve_channel("general").id),
                "channel_name": "general",
                "user_id": user,
                "user_name": PEOPLE.get(user, user),
                "command": "/agent",
                "text": text,
                "api_app_id": ws.app_id,
                "is_enterprise_install": "false",
                "response_url": "http://127.0.0.1:9/commands/response",
                "trigger_id": ws.issue_trigger(user),
            }
        ).encode()

    def command(
        self,
        text: str,
        *,
        user: str = REQUESTER,
        channel: str | None = None,
        workspace: Workspace | None = None,
    ) -> Ack:
        """Type ``/agent text`` as ``user`` (in ``workspace``, if given)."""
        return self.post(self.command_body(text, user=user, channel=channel, workspace=workspace))

    def click_body(
        self,
        user: str,
        action_id: str,
        message: Message,
        *,
        value: str | None = None,
        response_url: str = NOWHERE,
        workspace: Workspace | None = None,
    ) -> tuple[bytes, str]:
        """Return the form body of a click on the button ``action_id`` of ``message``.

        The button's value is read from the message (as Slack does) unless ``value`` is given.
        Also returns the ``trigger_id`` Slack issued for the click.
        """
        ws = workspace or self.world.workspace
        trigger = ws.issue_trigger(user)
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
        }
        if message.thread_ts:
            container["thread_ts"] = message.thread_ts
        payload = self._action_payload(user, action_id, message, container, trigger, value, ws)
        payload["response_url"] = response_url
        payload["message"] = message.to_api(team_id=ws.team_id, app_id=ws.app_id)
        return urlencode({"payload": json.dumps(payload)}).encode(), trigger

    def click(
        self,
        user: str,
        action_id: str,
        message: Message,
        *,
        value: str | None = None,
        workspace: Workspace | None = None,
    ) -> Ack:
        """Click the button ``action_id`` of ``message`` as ``user`` (of ``workspace``)."""
        body, _ = self.click_body(user, action_id, message, value=value, workspace=workspace)
        return self.post(body)

    def click_ephemeral(
        self, user: str, action_id: str, message: EphemeralMessage, *, value: str | None = None
    ) -> Ack:
        """Click a button of an ephemeral message (Slack sends no ``message`` for those)."""
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": message.message_ts,
            "channel_id": message.channel,
            "is_ephemeral": True,
        }
        if message.thread_ts:
            container["thread_ts"] = message.thread_ts
        trigger = self.world.workspace.issue_trigger(user)
        payload = self._action_payload(user, action_id, message, container, trigger, value)
        return self.post(urlencode({"payload": json.dumps(payload)}).encode())

    def _action_payload(
        self,
        user: str,
        action_id: str,
        message: Message | EphemeralMessage,
        container: dict[str, Any],
        trigger: str,
        value: str | None,
        workspace: Workspace | None = None,
    ) -> dict[str, Any]:
        """The ``block_actions`` payload of a click on ``action_id`` in ``message``."""
        ws = workspace or self.world.workspace
        button = find_button(message, action_id)
        return {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": PEOPLE.get(user, user),
                "name": PEOPLE.get(user, user),
                "team_id": ws.team_id,
            },
            "api_app_id": ws.app_id,
            "token": "legacy-verification-token",
            "container": container,
            "trigger_id": trigger,
            "team": {"id": ws.team_id, "domain": ws.domain},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": message.channel, "name": "general"},
            "state": {"values": {}},
            "response_url": NOWHERE,
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": button["block_id"],
                    "text": button["text"],
                    "value": value or button["value"],
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }

    def submit_body(self, user: str, view: View, value: str) -> bytes:
        """Return the form body of submitting ``view`` with ``value`` in its one input."""
        ws = self.world.workspace
        [field] = [b for b in view.view["blocks"] if b["type"] == "input"]
        state = {
            field["block_id"]: {
                field["element"]["action_id"]: {"type": "plain_text_input", "value": value}
            }
        }
        submitted = {**view.view, "state": {"values": state}}
        payload: dict[str, Any] = {
            "type": "view_submission",
            "team": {"id": ws.team_id, "domain": ws.domain},
            "user": {
                "id": user,
                "username": PEOPLE.get(user, user),
                "name": PEOPLE.get(user, user),
                "team_id": ws.team_id,
            },
            "api_app_id": ws.app_id,
            "token": "legacy-verification-token",
            "trigger_id": ws.issue_trigger(user),
            "view": submitted,
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }
        return urlencode({"payload": json.dumps(payload)}).encode()

    def submit(self, user: str, view: View, value: str) -> Ack:
        """Submit the modal ``view`` as ``user`` with ``value`` typed in its input."""
        return self.post(self.submit_body(user, view, value))

    def decision(self, approval_id: str) -> Approval:
        """Wait until the approval is decided (a click's listener runs after its ack)."""

        def probe() -> Approval | None:
            approval = self.services.approvals.get(approval_id)
            return None if approval.status == ApprovalStatus.PENDING else approval

        return eventually(probe, what=f"a decision on {approval_id}")

    # -- the background parts ------------------------------------------------------------------

    def work(self) -> int:
        """Run the worker until nothing is runnable now; return how many executions ran."""
        total = 0
        while ran := self.worker.run_once():
            total += ran
        return total

    def drain(self) -> None:
        """Deliver every notice that is due now."""
        self.dispatcher.drain()

    def close(self) -> None:
        """Stop serving, let listeners in flight finish, release the database."""
        self._serving.stop()
        self.app.listener_runner.listener_executor.shutdown(wait=True)
        self._after_acks.close()
        self._http.close()
        self.services.store.engine.dispose()


class SlackWorld:
    """The demo provider, the fake Slack with the scenario's people, and the bot instances."""

    def __init__(
        self,
        tmp_path: Path,
        database_url: str,
        *,
        approvers: Sequence[str] = (APPROVER,),
        required: int = 1,
    ) -> None:
        self.tmp_path = tmp_path
        self.database_url = database_url
        self.approvers = tuple(approvers)
        self.required = required
        self.instances: list[BotInstance] = []
        self.provider: RunningProvider = start_in_thread(tmp_path / "provider-ledger.db")
        self.slack: RunningSlackApi = start_slack_api(Workspace())
        self.workspace: Workspace = self.slack.workspace
        for user_id, name in PEOPLE.items():
            self.workspace.add_user(name, user_id=user_id)
        self.channel = self.workspace.resolve_channel("general").id

    def settings(self) -> Settings:
        """Return the settings of a Signoff process in this world (built explicitly)."""
        return Settings.from_env(
            {
                "SIGNOFF_DATABASE_URL": self.database_url,
                "SIGNOFF_DEMO": "1",
                "SIGNOFF_APPROVERS": ",".join(self.approvers),
                "SIGNOFF_APPROVALS_REQUIRED": str(self.required),
                "SIGNOFF_DEMO_PROVIDER_URL": self.provider.url,
                "SIGNOFF_SLACK_API_URL": self.slack.api_url,
                "SLACK_BOT_TOKEN": DEFAULT_TOKEN,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                **UNPACED,
            }
        )

    def instance(self, *, migrate: bool = True) -> BotInstance:
        """Start one more Signoff app instance on the shared database."""
        bot = BotInstance(self, self.settings(), migrate=migrate)
        self.instances.append(bot)
        return bot

    def close(self) -> None:
        """Stop every instance, the fake Slack and the provider."""
        for bot in self.instances:
            bot.close()
        self.slack.stop()
        self.provider.stop()

    def __enter__(self) -> SlackWorld:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- reading the workspace -----------------------------------------------------------------

    def roots(self) -> list[Message]:
        """Return the top-level messages of the channel."""
        return self.workspace.messages(self.channel)

    def root_of(self, run_id: str) -> Message:
        """Return the root message of ``run_id`` (its History button carries the run id)."""
        found = [
            m
            for m in self.roots()
            if any(b.get("block_id") == f"run:{run_id}" for b in m.blocks or [])
        ]
        assert len(found) == 1, f"{len(found)} root messages for run {run_id}"
        return found[0]

    def replies(self, run_id: str) -> list[Message]:
        """Return the replies in the thread of ``run_id``."""
        return self.workspace.messages(self.channel, thread_ts=self.root_of(run_id).ts)

    def reply_texts(self, run_id: str) -> list[str]:
        """Return the texts of the replies in the thread of ``run_id``."""
        return [m.text for m in self.replies(run_id)]

    def dm(self, user: str) -> list[Message]:
        """Return the messages in the bot's DM with ``user`` (none if it was never opened)."""
        ims = [c for c in self.workspace.channels() if c.is_im and c.user == user]
        return self.workspace.messages(ims[0].id) if ims else []

    def card(self, approval_id: str, *, channel: str | None = None) -> Message:
        """Return the one message in ``channel`` (the run's thread by default) that is the
        card of ``approval_id``, decided or not."""
        where = channel or self.channel
        timeline = [
            m
            for root in self.workspace.messages(where)
            for m in [root, *self.workspace.messages(where, thread_ts=root.ts)]
        ]
        found = [m for m in timeline if is_card_of(m, approval_id)]
        assert len(found) == 1, f"{len(found)} cards of {approval_id} in {where}"
        return found[0]

    def ephemerals(self, user: str) -> list[str]:
        """Return the texts of the ephemeral messages shown to ``user``."""
        return [e.text for e in self.workspace.ephemerals(user=user)]

    def new_ephemerals(self, user: str, seen: int, *, drain: BotInstance) -> list[str]:
        """Wait for ephemeral messages to ``user`` beyond the first ``seen``; return them."""

        def probe() -> list[str]:
            return self.ephemerals(user)[seen:]

        return eventually(probe, between=drain.drain, what=f"an ephemeral message to {user}")

    def modal(self, callback_id: str, approval_id: str) -> View:
        """Wait for the modal ``callback_id`` opened for ``approval_id`` (opened after the ack,
        from a card or from the Home tab)."""

        def probe() -> list[View]:
            return [
                v
                for v in self.workspace.views()
                if v.view.get("callback_id") == callback_id
                and parse_approval_ref(unmarked(v.private_metadata)[0])[0] == approval_id
            ]

        found = eventually(probe, what=f"the {callback_id} modal")
        assert len(found) == 1, f"{len(found)} {callback_id} modals for {approval_id}"
        return found[0]

    def posted(self) -> list[str]:
        """Return everything the bot sent to be shown (texts and blocks, as JSON text)."""
        found = []
        for call in self.workspace.calls():
            if call.method in POSTING_METHODS and call.ok:
                found.append(str(call.params.get("text") or ""))
                found.append(json.dumps(call.params.get("blocks") or [], ensure_ascii=False))
        return found

    def successful(self, method: str) -> list[ApiCall]:
        """Return the successful calls of ``method``."""
        return [c for c in self.workspace.calls(method) if c.ok]


__all__ = [
    "ACK_LIMIT_S",
    "APPROVER",
    "OUTSIDER",
    "PEOPLE",
    "REQUESTER",
    "SECOND_APPROVER",
    "SIGNING_SECRET",
    "TASK",
    "Ack",
    "BotInstance",
    "SlackWorld",
    "eventually",
    "sign",
]
