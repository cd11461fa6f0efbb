"""A gateway's run: one per gateway name, client identity and session key (and conversation
id, for a call that names one), held under a lease.

The run is created on first use and found again by its id (derived from the key), so a
restarted gateway continues the same run. While a gateway serves, it holds the run's
lease and heartbeats it; it writes the journal itself, fenced like any worker. A worker
that claims the run (its gateway died and the lease expired) parks it; the next gateway
for the same client takes it back with ``adopt_run`` once no live lease is held.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from agent_runtime import (
    Lease,
    LeaseLost,
    Run,
    RunId,
    RunNotFound,
    RunStatus,
    StepKind,
    StepRecord,
    Wait,
)
from agent_runtime.serialization import input_hash, round_trip
from agent_runtime.worker import default_owner
from bot.app.wiring import Services
from bot.mcp.exceptions import RunUnavailable
from bot.mcp.parking import DETACHED, WORKFLOW

logger = logging.getLogger(__name__)

_NAMESPACE = uuid.UUID("5b1f6a52-95c8-4c1e-9a53-1c4a2f0d7e11")


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionKey:
    """Who a gateway serves: its name, the client's identity, a session key, and the
    conversation the client named (None: the gateway's own run)."""

    gateway: str
    client: str
    session: str = "default"
    conversation: str | None = None
    team: str = ""
    """The Slack workspace the runs are in ("" for none); not part of the run's id."""

    @property
    def run_id(self) -> RunId:
        """The id of the run of this gateway, client, session and conversation."""
        text = f"{self.gateway}\x00{self.client}\x00{self.session}"
        if self.conversation is not None:
            text += f"\x00{self.conversation}"
        return RunId(uuid.uuid5(_NAMESPACE, text).hex)

    def to_json(self, channel: str | None = None) -> dict[str, Any]:
        """Return the run's input; with ``channel`` its thread and cards go to that Slack
        channel (through ``signoff serve``)."""
        task = f"MCP gateway {self.gateway}: tool calls of {self.client}"
        data: dict[str, Any] = {
            "gateway": self.gateway,
            "client": self.client,
            "session": self.session,
            "task": task,
            "requester": {"user_id": self.client} | ({"team_id": self.team} if self.team else {}),
        }
        if self.conversation is not None:
            data["conversation"] = self.conversation
            data["task"] = f"{task}, conversation {self.conversation}"
        if channel:
            data["context"] = {"slack": {"channel": channel, "team": self.team}}
        return data


class GatewayRun:
    """The run a gateway journals its calls in, while it holds the run's lease."""

    def __init__(self, services: Services, key: SessionKey, lease: Lease) -> None:
        self.services = services
        self.key = key
        self._lease = lease
        self._run = services.store.get_run(key.run_id)
        self._next = len(services.store.load_journal(key.run_id))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name="mcp-heartbeat", daemon=True)
        self._heartbeat.start()

    @property
    def run_id(self) -> RunId:
        """The run's id."""
        return self.key.run_id

    @property
    def lock(self) -> threading.Lock:
        """Held while a call reads and writes the journal, so calls append one at a time."""
        return self._lock

    @property
    def next_position(self) -> int:
        """The journal position the next entry takes."""
        return self._next

    def journal(self) -> list[StepRecord]:
        """Return the run's journal."""
        return self.services.store.load_journal(self.run_id)

    def append(self, name: str, step_input: Any, output: Any) -> int:
        """Append one journal entry under the lease (``LeaseLost`` if lost); return its position."""
        now = self.services.runtime.clock.now()
        record = StepRecord(
            position=self._next,
            kind=StepKind.STEP,
            name=name,
            input_hash=input_hash(step_input),
            output=round_trip(output, what=f"the entry {name!r}"),
            started_at=now,
            finished_at=now,
        )
        notices = self.services.runtime.notifier.step_committed(self._run, record)
        self.services.store.append_step(self._lease, record, notices)
        self._next += 1
        return record.position

    def detach(self) -> None:
        """Stop the heartbeat and park the run until this client's next gateway adopts it
        (once: later calls do nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._heartbeat.join()
        now = self.services.runtime.clock.now()
        try:
            self.services.store.suspend(self._lease, Wait(wake_at=None, key=DETACHED), now)
        except LeaseLost:
            logger.info(
                "gateway run taken or cancelled", extra={"action": "detach", "run_id": self.run_id}
            )

    def _beat(self) -> None:
        ttl = self.services.settings.lease_ttl
        while not self._stop.wait(ttl.total_seconds() / 3):
            expires = self.services.runtime.clock.now() + ttl
            if not self.services.store.renew_lease(self._lease, expires):
                logger.warning(
                    "gateway lease lost", extra={"action": "heartbeat", "run_id": self.run_id}
                )
                return


def attach(
    services: Services, key: SessionKey, *, patience: timedelta, channel: str | None = None
) -> GatewayRun:
    """Create (posting to ``channel``, if named) or adopt the run of ``key``, waiting up to
    ``patience`` for a dead gateway's lease to expire; ``RunUnavailable`` if it is finished
    or still held."""
    _ensure_run(services, key, channel)
    deadline = time.monotonic() + patience.total_seconds()
    while True:
        lease = _adopt(services, key)
        if lease is not None:
            return GatewayRun(services, key, lease)
        if time.monotonic() >= deadline:
            raise RunUnavailable(key.run_id, "is held by another gateway")
        time.sleep(0.1)  # polling for the previous holder's lease to expire


def _ensure_run(services: Services, key: SessionKey, channel: str | None) -> None:
    try:
        run = services.store.get_run(key.run_id)
    except RunNotFound:
        now = services.runtime.clock.now()
        draft = Run(
            id=key.run_id,
            workflow=WORKFLOW,
            status=RunStatus.PENDING,
            input=key.to_json(channel),
            created_at=now,
            updated_at=now,
            due_at=now,
        )
        services.store.create_run(
            draft.id, WORKFLOW, draft.input, now, services.runtime.notifier.run_started(draft)
        )
        return
    if run.status.finished:
        raise RunUnavailable(key.run_id, f"is {run.status.value}")


def _adopt(services: Services, key: SessionKey) -> Lease | None:
    now = services.runtime.clock.now()
    lease = services.store.adopt_run(
        key.run_id,
        f"mcp-gateway:{default_owner()}",
        now=now,
        expires_at=now + services.settings.lease_ttl,
    )
    if lease is None and services.store.get_run(key.run_id).status == RunStatus.CANCELLED:
        raise RunUnavailable(key.run_id, "was cancelled")
    return lease
