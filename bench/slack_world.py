"""The world ``bench.slack_ack`` measures in: two ``signoff serve`` processes on a scratch
PostgreSQL database, the local Slack and the demo provider; Slack's signed requests to them,
and bursts of them timed."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg
import requests
from sqlalchemy import Engine, select

from bench._common import scratch_database, sqlalchemy_pg_url
from bot.app.processes import stop_process
from devkit.demo.provider_server import RunningProvider, start_in_thread
from devkit.sandbox.slack_api import (
    DEFAULT_TOKEN,
    Message,
    RunningSlackApi,
    Workspace,
    start_slack_api,
)
from store import open_store
from store.models import approvals, outbox, runs

APPROVER, REQUESTER = "U_DANA", "U_REQ"
SIGNING_SECRET = "bench-signing-secret-0123456789abcdef"
TASK = "refund order 1042 and email the customer"
PEOPLE = {APPROVER: "dana", REQUESTER: "req"}
FORM = "application/x-www-form-urlencoded"
START_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 120.0


# -- processes ----------------------------------------------------------------------------


def free_port() -> int:
    """Return a TCP port nobody listens on right now (the OS's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def signoff_command() -> list[str]:
    """The ``signoff`` script next to this Python, or the module."""
    script = Path(sys.executable).with_name("signoff")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli.main"]


class Serve:
    """A ``signoff serve`` subprocess on a free port, logging to a file."""

    def __init__(self, name: str, env: dict[str, str], workdir: Path, *args: str) -> None:
        self.name = name
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.events_url = f"{self.base}/slack/events"
        self.health_url = f"{self.base}/healthz"
        self.log_path = workdir / f"serve-{name}.log"
        self._log = self.log_path.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [*signoff_command(), "serve", *args],
            env={**env, "SIGNOFF_PORT": str(self.port)},
            cwd=workdir,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_healthy(self) -> None:
        """Wait until ``/healthz`` answers 200 with status ``ok`` (up, not starting)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        with requests.Session() as http:
            http.trust_env = False
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"serve {self.name} exited:\n{self.tail()}")
                with contextlib.suppress(requests.RequestException):
                    answer = http.get(self.health_url, timeout=1.0)
                    if answer.status_code == 200 and answer.json()["status"] == "ok":
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"serve {self.name} not healthy:\n{self.tail()}")
                time.sleep(0.05)

    def tail(self) -> str:
        """Return the end of the process's log."""
        self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; always reaps the process (idempotent)."""
        stop_process(self.process)
        self._log.close()


# -- Slack's requests -----------------------------------------------------------------------


def signed(body: bytes) -> dict[str, str]:
    """The headers Slack sends with ``body``: content type, timestamp, signature."""
    stamp = str(int(time.time()))
    digest = hmac.new(
        SIGNING_SECRET.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256
    ).hexdigest()
    return {
        "Content-Type": FORM,
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }


def command_body(ws: Workspace, channel: str, text: str = TASK) -> bytes:
    """The form body of ``/agent text`` typed by the requester (unique by its trigger id)."""
    return urlencode(
        {
            "token": "legacy-verification-token",
            "team_id": ws.team_id,
            "team_domain": ws.domain,
            "channel_id": channel,
            "channel_name": "general",
            "user_id": REQUESTER,
            "user_name": PEOPLE[REQUESTER],
            "command": "/agent",
            "text": text,
            "api_app_id": ws.app_id,
            "is_enterprise_install": "false",
            "response_url": "http://127.0.0.1:9/commands/response",
            "trigger_id": ws.issue_trigger(REQUESTER),
        }
    ).encode()


def approve_body(ws: Workspace, card: Message) -> bytes:
    """The form body of the approver clicking Approve on ``card``."""
    [(block_id, button)] = [
        (b.get("block_id", ""), e)
        for b in card.blocks or []
        if b.get("type") == "actions"
        for e in b["elements"]
        if e.get("action_id") == "approval.approve"
    ]
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": card.ts,
        "channel_id": card.channel,
        "is_ephemeral": False,
    }
    if card.thread_ts:
        container["thread_ts"] = card.thread_ts
    user = {
        "id": APPROVER,
        "username": PEOPLE[APPROVER],
        "name": PEOPLE[APPROVER],
        "team_id": ws.team_id,
    }
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": user,
        "api_app_id": ws.app_id,
        "token": "legacy-verification-token",
        "container": container,
        "trigger_id": ws.issue_trigger(APPROVER),
        "team": {"id": ws.team_id, "domain": ws.domain},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": card.channel, "name": "general"},
        "message": card.to_api(team_id=ws.team_id, app_id=ws.app_id),
        "state": {"values": {}},
        "response_url": "http://127.0.0.1:9/actions/response",
        "actions": [
            {
                "type": "button",
                "action_id": "approval.approve",
                "block_id": block_id,
                "text": button["text"],
                "value": button["value"],
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


# -- timing HTTP requests ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request to time: GET when ``body`` is None, else a signed POST."""

    url: str
    warm_url: str
    body: bytes | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer to a timed request."""

    status: int
    text: str
    seconds: float
    done_at: float  # time.perf_counter() at the answer
    done_wall: float  # time.time() at the answer


def burst(batch: Sequence[Request]) -> list[Answer]:
    """Send every request at once (one thread and keep-alive connection each); time each."""
    barrier = threading.Barrier(len(batch))
    answers: list[Answer | None] = [None] * len(batch)
    errors: list[BaseException] = []

    def send(index: int, request: Request) -> None:
        with requests.Session() as http:
            http.trust_env = False
            try:
                http.get(request.warm_url, timeout=10).raise_for_status()
                headers = signed(request.body) if request.body is not None else {}
                barrier.wait(timeout=30)
                started = time.perf_counter()
                if request.body is None:
                    response = http.get(request.url, timeout=30)
                else:
                    response = http.post(
                        request.url, data=request.body, headers=headers, timeout=30
                    )
                done = time.perf_counter()
                answers[index] = Answer(
                    response.status_code, response.text, done - started, done, time.time()
                )
            except BaseException as exc:  # reported below; a broken barrier frees the others
                errors.append(exc)
                barrier.abort()

    threads = [threading.Thread(target=send, args=(i, r), daemon=True) for i, r in enumerate(batch)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed: {errors[0]!r}")
    done = [a for a in answers if a is not None]
    if len(done) != len(batch):
        raise RuntimeError(f"{len(batch) - len(done)} requests got no answer")
    bad = [a for a in done if a.status != 200]
    if bad:
        raise RuntimeError(f"{len(bad)} requests not acknowledged: {bad[0].status} {bad[0].text}")
    return done


# -- the world ------------------------------------------------------------------------------


@dataclass
class World:
    """The database, the fake Slack, the provider and the two instances."""

    db_url: str
    store_url: str
    slack: RunningSlackApi
    provider: RunningProvider
    channel: str
    a: Serve
    b: Serve
    poll: psycopg.Connection[Any]
    reader: Engine = field(repr=False)

    @property
    def ws(self) -> Workspace:
        """The fake Slack workspace."""
        return self.slack.workspace

    def wait(self, probe: Callable[[], bool], what: str, timeout: float = SETTLE_TIMEOUT_S) -> None:
        """Poll ``probe`` every 20 ms; fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not probe():
            for serve in (self.a, self.b):
                if serve.process.poll() is not None:
                    raise RuntimeError(f"serve {serve.name} exited:\n{serve.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}")
            time.sleep(0.02)

    def approvals_of(self, run_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Return each run's approval ids by tool."""
        found: dict[str, dict[str, str]] = {r: {} for r in run_ids}
        with self.reader.connect() as conn:
            for row in conn.execute(
                select(approvals.c.run_id, approvals.c.tool, approvals.c.id).where(
                    approvals.c.run_id.in_(run_ids)
                )
            ):
                found[row.run_id][row.tool] = row.id
        return found

    def parked(self, run_ids: Sequence[str], keys: dict[str, str] | None = None) -> bool:
        """Tell whether every run is waiting (for ``keys[run]`` when given)."""
        with self.reader.connect() as conn:
            rows = conn.execute(
                select(runs.c.id, runs.c.status, runs.c.wait_key).where(runs.c.id.in_(run_ids))
            ).all()
        return len(rows) == len(run_ids) and all(
            r.status == "waiting" and (keys is None or r.wait_key == keys[r.id]) for r in rows
        )

    def cards(self, approval_ids: Sequence[str]) -> dict[str, Message] | None:
        """Return the thread card of each approval once all are in Slack."""
        keys = [f"approval:{a}:card" for a in approval_ids]
        with self.reader.connect() as conn:
            rows = conn.execute(
                select(outbox.c.key, outbox.c.channel, outbox.c.ts).where(
                    outbox.c.key.in_(keys), outbox.c.status == "sent"
                )
            ).all()
        if len(rows) != len(keys):
            return None
        found = {}
        for row in rows:
            message = self.ws.find_message(row.channel, row.ts)
            if message is None:
                return None
            found[row.key.split(":")[1]] = message
        return found

    def journal_heads(self, run_ids: Sequence[str]) -> dict[str, int]:
        """Return the last journal position of each run (one query, on the poll connection)."""
        rows = self.poll.execute(
            "SELECT run_id, max(position) FROM steps WHERE run_id = ANY(%s) GROUP BY run_id",
            [[uuid.UUID(hex=r) for r in run_ids]],
        ).fetchall()
        return {row[0].hex: int(row[1]) for row in rows}

    def decided_at(self, approval_ids: Sequence[str]) -> dict[str, datetime]:
        """Return when each approval was decided."""
        with self.reader.connect() as conn:
            rows = conn.execute(
                select(approvals.c.id, approvals.c.decided_at).where(
                    approvals.c.id.in_(approval_ids)
                )
            ).all()
        return {r.id: r.decided_at for r in rows if r.decided_at is not None}


@contextlib.contextmanager
def world(dsn: str, *, concurrency: int | None, b_worker: bool) -> Iterator[World]:
    """Create everything; tear everything down (database included) on exit (``concurrency``:
    the workers', else ``signoff serve``'s default)."""
    database = contextlib.ExitStack()
    db_url = database.enter_context(
        scratch_database(sqlalchemy_pg_url(dsn), prefix="signoff_bench_ack")
    )
    store_url = db_url.replace("postgresql://", "postgresql+psycopg://", 1)
    workdir = Path(tempfile.mkdtemp(prefix="signoff-bench-ack-"))
    cleanup: list[Callable[[], object]] = []
    try:
        store = open_store(store_url)  # migrate once, before the instances start
        cleanup.append(store.engine.dispose)
        slack = start_slack_api(Workspace())
        cleanup.append(slack.stop)
        for user_id, user_name in PEOPLE.items():
            slack.workspace.add_user(user_name, user_id=user_id)
        provider = start_in_thread(workdir / "provider-ledger.db")
        cleanup.append(provider.stop)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "SLACK_"))}
        env.update(
            SIGNOFF_DATABASE_URL=store_url,
            SIGNOFF_APPROVERS=APPROVER,
            SIGNOFF_DEMO="1",
            SIGNOFF_DEMO_PROVIDER_URL=provider.url,
            SIGNOFF_SLACK_API_URL=slack.api_url,
            SLACK_BOT_TOKEN=DEFAULT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            NO_PROXY="127.0.0.1,localhost",
            PYTHONUNBUFFERED="1",
            # acks are measured, not Slack's per-channel pacing: 50 runs in one channel
            # would otherwise take minutes to show their cards
            SIGNOFF_SLACK_POST_INTERVAL_SECONDS="0.001",
            SIGNOFF_SLACK_POST_BURST="1000",
        )
        threads = () if concurrency is None else ("--concurrency", str(concurrency))
        a = Serve("A", env, workdir, *threads)
        cleanup.append(a.stop)
        b = Serve("B", env, workdir, *(threads if b_worker else ("--no-worker",)))
        cleanup.append(b.stop)
        a.wait_healthy()
        b.wait_healthy()
        poll = psycopg.connect(db_url, autocommit=True)
        cleanup.append(poll.close)
        yield World(
            db_url=db_url,
            store_url=store_url,
            slack=slack,
            provider=provider,
            channel=slack.workspace.resolve_channel("general").id,
            a=a,
            b=b,
            poll=poll,
            reader=store.engine,
        )
    finally:
        for step in reversed(cleanup):
            with contextlib.suppress(Exception):
                step()
        database.close()
        shutil.rmtree(workdir, ignore_errors=True)
