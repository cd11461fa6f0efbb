"""Slack ack time and click-to-resume time of two ``signoff serve`` instances on PostgreSQL.

Run ``python -m bench.slack_ack`` (``--quick`` for 10 requests per burst instead of 50).

Set-up, all torn down at the end: a fresh PostgreSQL database on ``SIGNOFF_BENCH_PG_URL``
(default: the local server, as ``bench.steps``), created, migrated and dropped; one sandbox
Slack Web API (``devkit.sandbox``) and one demo payment provider served by this process; two
``signoff serve`` subprocesses on free ports, both on that database and that Slack: A with a
worker (``--concurrency``, default 4) and B as a front end (``--no-worker``; pass ``--b-worker``
to give B a worker too), each with its scheduler (outbox dispatch, approvals sweep, wake) and
the default 1 s poll interval, so a fast resume can only come from LISTEN/NOTIFY.

Every Slack request is signed as Slack signs it and posted over HTTP by one thread per
request, all released at once by a barrier (each thread's keep-alive connection is opened
beforehand, so the timings exclude the TCP handshake). Each instance first answers one
``/agent help``, untimed: Bolt's one-time ``auth.test`` call (made by the first requests of a
process, one per request in flight) is start-up cost, not ack time.

* baseline: N concurrent ``GET /healthz`` (half to A, half to B) — the same HTTP stack and
  concurrency with no work behind it;
* N concurrent ``/agent refund order 1042 and email the customer`` (half to A, half to B):
  the time to the HTTP 200 (the ack promises the run's id; the run is recorded with the
  request's signature in the one write before the ack, and created just after it);
* N concurrent Approve clicks, all on B, each on the refund card of a different run that A's
  worker ran up to its refund's approval: the time to the HTTP 200 (Bolt acks before the listener
  decides), then click-to-resume: from the click's HTTP 200 until the run's next journal entry
  is committed (seen by a poller on its own connection every ~2 ms), split into
  click → the approval's ``decided_at`` (stamped inside ``decide``, before its commit) and
  ``decided_at`` → resumed; and, since a late ack hides queueing from that measure, also
  counted from the moment the click was sent;
* the same one click at a time (Approve on each run's email card, which the run asks once
  its refund is done, after the run parked on it): click-to-resume without queueing.

Targets: ack p99 < 300 ms; click-to-resume p50 < 250 ms. Percentiles are nearest-rank
(with 50 samples, p99 is the maximum). The machine's noise moves single numbers: rerun
before drawing conclusions.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import hmac
import json
import math
import os
import re
import shutil
import socket
import statistics
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
from psycopg import sql
from sqlalchemy import Engine, select

from bench._common import default_dsn, fresh_name, sqlalchemy_pg_url
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

SIGNING_SECRET = "bench-signing-secret-0123456789abcdef"
TASK = "refund order 1042 and email the customer"
APPROVER, REQUESTER = "U_DANA", "U_REQ"
PEOPLE = {APPROVER: "dana", REQUESTER: "req"}
FORM = "application/x-www-form-urlencoded"
ACK_TARGET_P99_S = 0.300
RESUME_TARGET_P50_S = 0.250
START_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 120.0
POLL_EVERY_S = 0.002


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
        """Wait until ``/healthz`` answers 200."""
        deadline = time.monotonic() + START_TIMEOUT_S
        with requests.Session() as http:
            http.trust_env = False
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"serve {self.name} exited:\n{self.tail()}")
                with contextlib.suppress(requests.RequestException):
                    if http.get(self.health_url, timeout=1.0).status_code == 200:
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
def world(dsn: str, *, concurrency: int, b_worker: bool) -> Iterator[World]:
    """Create everything; tear everything down (database included) on exit."""
    name = fresh_name("signoff_bench_ack")
    admin = sqlalchemy_pg_url(dsn)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = admin.rsplit("/", 1)[0].split("?")[0]
    db_url = f"{base}/{name}"
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
        a = Serve("A", env, workdir, "--concurrency", str(concurrency))
        cleanup.append(a.stop)
        b = Serve(
            "B",
            env,
            workdir,
            *(("--concurrency", str(concurrency)) if b_worker else ("--no-worker",)),
        )
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
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        shutil.rmtree(workdir, ignore_errors=True)


# -- measurements ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resumes:
    """Click-to-resume seconds, its two parts, and the same counted from the click's send."""

    total: list[float]
    to_decision: list[float]
    decision_to_resume: list[float]
    from_send: list[float]


def watch_resumes(
    w: World, send: Callable[[], list[Answer]], approval_of: dict[str, str]
) -> tuple[list[Answer], Resumes]:
    """Send the clicks (in ``approval_of``'s order) and poll for each run's next entry."""
    run_ids = list(approval_of)
    before = w.journal_heads(run_ids)
    seen: dict[str, tuple[float, float]] = {}
    stop = threading.Event()

    def poller() -> None:
        while not stop.is_set() and len(seen) < len(run_ids):
            heads = w.journal_heads(run_ids)
            now, wall = time.perf_counter(), time.time()
            for run_id, head in heads.items():
                if run_id not in seen and head > before[run_id]:
                    seen[run_id] = (now, wall)
            time.sleep(POLL_EVERY_S)

    thread = threading.Thread(target=poller, daemon=True)
    thread.start()
    answers = send()
    w.wait(lambda: len(seen) == len(run_ids), "every run to resume")
    stop.set()
    thread.join(timeout=10)
    decided = w.decided_at(list(approval_of.values()))
    ordered = [(run_id, answer) for run_id, answer in zip(run_ids, answers, strict=True)]
    total = [seen[r][0] - a.done_at for r, a in ordered]
    to_decision = [decided[approval_of[r]].timestamp() - a.done_wall for r, a in ordered]
    rest = [seen[r][1] - decided[approval_of[r]].timestamp() for r, _ in ordered]
    from_send = [t + a.seconds for t, (_, a) in zip(total, ordered, strict=True)]
    return answers, Resumes(total, to_decision, rest, from_send)


def started_run(answer: Answer) -> str:
    """Return the run id in a ``Started run `…``` ack."""
    found = re.search(r"Started run `([0-9a-f]{32})`", str(json.loads(answer.text)["text"]))
    if found is None:
        raise RuntimeError(f"no run started: {answer.text}")
    return found.group(1)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def row(label: str, values: Sequence[float], baseline: Sequence[float] | None = None) -> str:
    """One table row in milliseconds: n, p50, p90, p99, max, and the ratio to the baseline."""
    ms = [v * 1000 for v in values]
    cells = f"{label:<48} {len(ms):>4} " + " ".join(
        f"{x:>8.1f}" for x in (percentile(ms, 50), percentile(ms, 90), percentile(ms, 99), max(ms))
    )
    if baseline:
        ratio50 = statistics.median(values) / statistics.median(baseline)
        ratio99 = percentile(values, 99) / percentile(baseline, 99)
        cells += f"   x{ratio50:.1f} / x{ratio99:.1f}"
    return cells


def run(n: int, sequential: int, *, concurrency: int, b_worker: bool) -> bool:
    """Run the benchmark; print the tables; return whether both targets were met."""
    started = time.perf_counter()
    with world(default_dsn(), concurrency=concurrency, b_worker=b_worker) as w:
        print(
            f"set-up: 2 x signoff serve (A: worker x{concurrency}; B: "
            f"{'worker' if b_worker else 'no worker'}) on a fresh PostgreSQL database, "
            f"{n} requests per burst, poll interval 1 s\n"
        )
        for serve in (w.a, w.b):
            [hello] = burst(
                [Request(serve.events_url, serve.health_url, command_body(w.ws, w.channel, "help"))]
            )
            if "/agent <task>" not in hello.text:
                raise RuntimeError(f"unexpected answer to /agent help: {hello.text}")
        halves = [w.a, w.b] * n
        health = burst([Request(s.health_url, s.health_url) for s in halves[:n]])
        commands = burst(
            [Request(s.events_url, s.health_url, command_body(w.ws, w.channel)) for s in halves[:n]]
        )
        run_ids = [started_run(a) for a in commands]
        w.wait(lambda: w.parked(run_ids), f"{n} runs to wait for their refunds' approvals")
        ids = w.approvals_of(run_ids)
        refunds = {r: ids[r]["issue_refund"] for r in run_ids}
        found: dict[str, Message] = {}

        def cards_out(approval_ids: list[str]) -> bool:
            got = w.cards(approval_ids)
            found.update(got or {})
            return got is not None

        w.wait(lambda: cards_out(list(refunds.values())), "every refund card to reach Slack")
        batch = [
            Request(w.b.events_url, w.b.health_url, approve_body(w.ws, found[refunds[r]]))
            for r in run_ids
        ]
        clicks, resumes = watch_resumes(w, functools.partial(burst, batch), refunds)

        one_by_one = run_ids[:sequential]
        emails: dict[str, str] = {}

        def parked_on_emails() -> bool:
            asked = w.approvals_of(one_by_one)
            emails.update(
                {r: asked[r]["send_email"] for r in one_by_one if "send_email" in asked[r]}
            )
            return (
                len(emails) == len(one_by_one)
                and w.parked(one_by_one, {r: f"approval:{emails[r]}" for r in one_by_one})
                and cards_out(list(emails.values()))
            )

        w.wait(parked_on_emails, "the runs to park on their email approvals (asked once refunded)")
        single_acks: list[Answer] = []
        single = Resumes([], [], [], [])
        for run_id in one_by_one:
            request = Request(
                w.b.events_url, w.b.health_url, approve_body(w.ws, found[emails[run_id]])
            )
            acks, measured = watch_resumes(
                w, functools.partial(burst, [request]), {run_id: emails[run_id]}
            )
            single_acks += acks
            for part in ("total", "to_decision", "decision_to_resume", "from_send"):
                getattr(single, part).extend(getattr(measured, part))

        base = [a.seconds for a in health]
        print(
            f"{'milliseconds':<48} {'n':>4} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8}"
            "   vs baseline p50 / p99"
        )
        print(row("GET /healthz (baseline, same concurrency)", base))
        print(row("/agent command -> HTTP 200 (A and B)", [a.seconds for a in commands], base))
        print(row("Approve click on B -> HTTP 200", [a.seconds for a in clicks], base))
        print(row(f"click on B -> run resumed ({n} at once)", resumes.total))
        print(row("  click 200 -> decided_at (taken in decide)", resumes.to_decision))
        print(row("  decided_at -> next journal entry seen", resumes.decision_to_resume))
        print(row("  click sent -> resumed (ack + the above)", resumes.from_send))
        print(row("click on B -> run resumed (one at a time)", single.total))
        print(row("  click 200 -> decided_at (taken in decide)", single.to_decision))
        print(row("  decided_at -> next journal entry seen", single.decision_to_resume))
        print(row("  click sent -> resumed (ack + the above)", single.from_send))
        print(
            row(
                "Approve click on B -> HTTP 200 (one at a time)",
                [a.seconds for a in single_acks],
                base,
            )
        )
        ack_p99 = max(
            percentile([a.seconds for a in commands], 99),
            percentile([a.seconds for a in clicks], 99),
        )
        resume_p50 = statistics.median(resumes.total)
        sent_p50 = statistics.median(resumes.from_send)
        ok_ack, ok_resume = ack_p99 < ACK_TARGET_P99_S, resume_p50 < RESUME_TARGET_P50_S
        print(
            f"\nack p99 {ack_p99 * 1000:.0f} ms (target < {ACK_TARGET_P99_S * 1000:.0f}): "
            f"{'met' if ok_ack else 'MISSED'}; click-to-resume p50 {resume_p50 * 1000:.0f} ms "
            f"under a {n}-click burst (target < {RESUME_TARGET_P50_S * 1000:.0f}): "
            f"{'met' if ok_resume else 'MISSED'} ({sent_p50 * 1000:.0f} ms from "
            f"the click's send); one at a time p50 "
            f"{statistics.median(single.total) * 1000:.0f} ms. Polling alone (no NOTIFY) "
            "would average 500 ms."
        )
    print(f"total {time.perf_counter() - started:.1f} s, everything cleaned up")
    return ok_ack and ok_resume


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and run."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.slack_ack",
        description="Slack ack and click-to-resume times of two signoff serve instances.",
    )
    parser.add_argument("--quick", action="store_true", help="10 requests per burst, not 50")
    parser.add_argument("--requests", type=int, default=None, help="requests per burst")
    parser.add_argument(
        "--one-by-one",
        type=int,
        default=None,
        help="clicks measured one at a time (default 10, 5 with --quick)",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="A's worker concurrency")
    parser.add_argument("--b-worker", action="store_true", help="give B a worker too")
    args = parser.parse_args(argv)
    n = args.requests or (10 if args.quick else 50)
    sequential = min(n, args.one_by_one or (5 if args.quick else 10))
    run(n, sequential, concurrency=args.concurrency, b_worker=args.b_worker)


if __name__ == "__main__":
    main()
