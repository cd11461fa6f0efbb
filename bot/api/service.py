"""The approvals API's work, apart from HTTP: who is asking, ask for sign-off, wait for it.

Each client's approvals belong to one Signoff run per conversation id, so they show in
``signoff runs``/``show``/``history`` and go through the same approvals service as an
agent's: cards in Slack, ``signoff approve``, the audit log, deadlines (fail-closed).
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from agent_runtime import Actor, Approval, ApprovalStatus, Run, RunId, RunStatus
from agent_runtime.exceptions import ApprovalNotFound, RunNotFound
from bot.api.asks import Ask
from bot.api.destinations import Destinations
from bot.api.exceptions import BadRequest, Conflict, NotFound, Unauthorized
from bot.api.keys import hash_key
from bot.api.tools import WORKFLOW, api_tool, qualified_name
from bot.app.approver_scope import UnscopedApprovers, require_scoped
from bot.app.wiring import Services
from bot.mcp.policy import load_policy
from store import ApiKey, RunDraft, SqlApiStore

WAIT_CAP = timedelta(seconds=60)
POLL = 0.2
WAITERS = 4
"""Long polls that may wait at once: half of ``signoff serve``'s eight HTTP threads, so
that Slack's requests are always answered within its three seconds."""
_NAMESPACE = uuid.UUID("0c0b8f5e-3f8e-4a8e-9a0e-6f6a2b7d4c31")


def run_id(client: str, conversation: str) -> RunId:
    """Return the id of the run of ``client``'s conversation."""
    return RunId(uuid.uuid5(_NAMESPACE, f"api\x00{client}\x00{conversation}").hex)


class ApiApprovals:
    """Authenticates clients, records their requests and reads back the decisions."""

    def __init__(self, services: Services, store: SqlApiStore, *, waiters: int = WAITERS) -> None:
        self._services = services
        self._policies = load_policy(
            Path(services.settings.api_policies) if services.settings.api_policies else None
        )
        self._store = store
        self._destinations = Destinations(services.settings.webhook_networks)
        self._clock = services.runtime.clock
        self._limit = waiters
        self._waiting = 0
        self._lock = threading.Lock()

    def client(self, key: str | None) -> ApiKey:
        """Return the live client of ``key``; ``Unauthorized`` if none."""
        found = None if not key else self._store.client(hash_key(key))
        if found is None:
            raise Unauthorized("a valid API key is needed (Authorization: Bearer KEY)")
        return found

    def create(self, client: ApiKey, ask: Ask) -> tuple[Approval, bool]:
        """Ask for sign-off (once per idempotency key); tell whether this call asked.
        ``RefusedDestination`` if the callback URL reaches where webhooks may not go."""
        if ask.callback_url is not None:
            self._destinations.check_url(ask.callback_url)
        now, settings = self._clock.now(), self._services.settings
        policy = ask.policy(self._policies, settings.approvers, settings.approver_groups)
        team = self._workspace(client.name, ask)
        if not team:
            if ask.channel and settings.slack_mode == "oauth":
                raise BadRequest(
                    "serving many Slack workspaces, 'channel' needs 'team': the id of the "
                    "workspace the channel is in"
                )
            try:
                require_scoped(policy, settings, "an approvals API request naming no 'team'")
            except UnscopedApprovers as exc:
                raise BadRequest(str(exc)) from exc
        draft = self._run(client.name, ask, team)
        request = self._store.open_request(
            client.name, ask.idempotency_key, ask.digest, draft, ask.callback_url, now
        )
        if request.request_hash != ask.digest:
            raise Conflict(
                f"the idempotency key {ask.idempotency_key!r} was used for another tool call"
            )
        existing = self._existing(request.approval_id)
        if existing is not None:
            return existing, False
        if self._services.store.get_run(RunId(request.run_id)).status.finished:
            raise Conflict(f"the run of conversation {ask.conversation!r} is finished")
        approval = self._services.approvals.request(
            run_id=request.run_id,
            position=request.position,
            tool=api_tool(qualified_name(client.name, ask.tool)),
            args=ask.arguments,
            policy=policy,
            requester=Actor(user_id=f"api:{client.name}", team_id=team),
            now=now,
        )
        return approval, request.created

    def wait(self, client: ApiKey, approval: str, seconds: float) -> Approval:
        """Return the client's approval once decided, or as it is after ``seconds`` (at
        once when too many long polls wait already)."""
        request = self._store.request_for(approval)
        if request is None or request.client != client.name:
            raise NotFound(f"no approval {approval!r}")
        current = self._current(approval)
        if current.status != ApprovalStatus.PENDING or seconds <= 0:
            return current
        if not self._enter():
            return current
        try:
            return self._poll(client, approval, min(seconds, WAIT_CAP.total_seconds()))
        finally:
            with self._lock:
                self._waiting -= 1

    @property
    def waiting(self) -> int:
        """How many long polls are waiting now."""
        with self._lock:
            return self._waiting

    def _enter(self) -> bool:
        with self._lock:
            if self._waiting >= self._limit:
                return False
            self._waiting += 1
            return True

    def _poll(self, client: ApiKey, approval: str, seconds: float) -> Approval:
        """Poll for the decision while ``client``'s key stays live (a key revoked meanwhile
        is answered ``Unauthorized``, as its next request would be)."""
        deadline = time.monotonic() + seconds
        while True:
            time.sleep(POLL)  # polling the store for a decision another process makes
            if self._store.client(client.key_hash) is None:
                raise Unauthorized("the API key was revoked")
            current = self._current(approval)
            if current.status != ApprovalStatus.PENDING or time.monotonic() >= deadline:
                return current

    def _existing(self, approval: str) -> Approval | None:
        try:
            return self._services.approvals.get(approval)
        except ApprovalNotFound:
            return None

    def _current(self, approval: str) -> Approval:
        """Return the approval, expired first if its deadline passed (fail-closed)."""
        found = self._services.approvals.get(approval)
        now = self._clock.now()
        if found.status == ApprovalStatus.PENDING and now >= found.deadline:
            self._services.approvals.sweep(now)
            found = self._services.approvals.get(approval)
        return found

    def _workspace(self, client: str, ask: Ask) -> str:
        """The workspace of the conversation's run: the one its first request named (a later
        request naming another is a ``Conflict``), or "" for none."""
        try:
            run = self._services.store.get_run(run_id(client, ask.conversation))
        except RunNotFound:
            return ask.team or ""
        team = str(run.input.get("requester", {}).get("team_id") or "")
        if ask.team is not None and ask.team != team:
            raise Conflict(
                f"the run of conversation {ask.conversation!r} is in workspace "
                f"{team or '(none)'}, not {ask.team}"
            )
        return team

    def _run(self, client: str, ask: Ask, team: str) -> RunDraft:
        rid = run_id(client, ask.conversation)
        data: dict[str, Any] = {
            "client": client,
            "conversation": ask.conversation,
            "task": f"API client {client}: conversation {ask.conversation}",
            "requester": Actor(user_id=f"api:{client}", team_id=team).to_json(),
        }
        if ask.channel:
            data["context"] = {"slack": {"channel": ask.channel, "team": team}}
        now = self._clock.now()
        draft = Run(
            id=rid,
            workflow=WORKFLOW,
            status=RunStatus.PENDING,
            input=data,
            created_at=now,
            updated_at=now,
            due_at=now,
        )
        return RunDraft(
            run_id=rid,
            workflow=WORKFLOW,
            input=data,
            notices=self._services.runtime.notifier.run_started(draft),
        )
