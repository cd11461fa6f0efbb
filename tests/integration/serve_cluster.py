"""A cluster of real ``signoff serve`` processes on one PostgreSQL database, behind one fake
Slack: the instances (``ServeProcess``), the ``Cluster`` that starts and stops them with the
sandbox Slack Web API and the demo payment provider in the test process, the ``cluster``
fixture, and readers of what the instances posted. Every process is SIGKILLed in a
``finally``. The ``cluster`` fixture (in ``conftest``) opens one on an emptied database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
import requests
from sqlalchemy import select

from agent_runtime import Approval, ApprovalStatus, RunId, RunStatus
from bot.app.wiring import Services, build_services
from bot.slack.blocks import APPROVE
from devkit.sandbox.slack_api import DEFAULT_TOKEN, Message
from store import models
from tests.integration import bound_port, signoff_command, signoff_env
from tests.integration.slack_harness import (
    ACK_LIMIT_S,
    APPROVER,
    SECOND_APPROVER,
    SIGNING_SECRET,
    UNPACED,
    Ack,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import (
    buttons,
    is_card_of,
    posts_per_message,
)

T = TypeVar("T")

pytestmark = pytest.mark.postgres

START_TIMEOUT_S = 30.0
WAIT_TIMEOUT_S = 20.0
LEASE_TTL_S = 2.0
POLL_INTERVAL_S = 0.2
TOOLS = ("issue_refund", "send_email")
ANSWER = "Order 1042: Refund: done; Email: done"
EVENTS_PATH = "/slack/events"


def free_port() -> int:
    """Return a TCP port nobody listens on right now (the OS's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServeProcess(BotInstance):
    """A ``signoff serve`` subprocess, reached over HTTP like Slack reaches it.

    It reuses ``BotInstance``'s signed ``post`` and its command/click/submit bodies; it has no
    in-process worker or dispatcher (``work``/``drain`` refuse), and ``services`` is a
    read-only view of the shared database built in the test process (for ``decision``).
    """

    def __init__(
        self,
        world: SlackWorld,
        name: str,
        services: Services,
        env: dict[str, str],
        *args: str,
        command: Sequence[str] | None = None,
    ) -> None:
        self.world = world
        self.name = name
        self.services = services
        self._port: int | None = None
        self._http = requests.Session()
        self._http.trust_env = False
        self.log = world.tmp_path / f"serve-{name}.log"
        self._log = self.log.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [*(command or signoff_command()), "serve", *args],
            env={**env, "SIGNOFF_PORT": "0"},
            cwd=world.tmp_path,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def port(self) -> int:
        """The port it listens on (any free one: it logs which once it has it)."""
        if self._port is None:
            self._port = bound_port(
                self.log, EVENTS_PATH, timeout=START_TIMEOUT_S, alive=self.assert_alive
            )
        return self._port

    @property
    def url(self) -> str:  # type: ignore[override]
        """Where Slack sends it events."""
        return f"http://127.0.0.1:{self.port}{EVENTS_PATH}"

    @property
    def health_url(self) -> str:
        """Its liveness probe."""
        return f"http://127.0.0.1:{self.port}/healthz"

    def wait_healthy(self) -> None:
        """Wait until ``/healthz`` answers 200 with status ``ok``, not ``starting`` (the
        process fails the test if it exits)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            self.assert_alive()
            try:
                answer = self._http.get(self.health_url, timeout=1.0)
                if answer.status_code == 200 and answer.json()["status"] == "ok":
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name} not healthy after {START_TIMEOUT_S:g}s:\n{self.output()}"
                )
            time.sleep(0.05)

    def assert_alive(self) -> None:
        """Fail with the process's log if it has exited."""
        code = self.process.poll()
        assert code is None, f"serve {self.name} exited with {code}:\n{self.output()}"

    def output(self) -> str:
        """Return what the process has logged so far."""
        self._log.flush()
        return self.log.read_text(encoding="utf-8", errors="replace")[-6000:]

    def sigkill(self) -> None:
        """Kill the process with SIGKILL and reap it."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def work(self) -> int:
        """The process's own worker does the work."""
        raise NotImplementedError("a serve process runs its own worker")

    def drain(self) -> None:
        """The process's own dispatcher delivers the notices."""
        raise NotImplementedError("a serve process runs its own dispatcher")

    def close(self) -> None:
        """SIGKILL the process (idempotent) and close the HTTP session."""
        self.sigkill()
        self._log.close()
        self._http.close()


class Cluster:
    """The world, a read-only view of the database, and the serve processes started so far."""

    def __init__(self, world: SlackWorld, pg_url: str) -> None:
        self.world = world
        self.reader = build_services(world.settings(), migrate=False)
        self.env = signoff_env(
            pg_url,
            lease_ttl=LEASE_TTL_S,
            poll_interval=POLL_INTERVAL_S,
            extra={
                "SIGNOFF_APPROVERS": ",".join(world.approvers),
                "SIGNOFF_DEMO_PROVIDER_URL": world.provider.url,
                "SIGNOFF_SLACK_API_URL": world.slack.api_url,
                "SLACK_BOT_TOKEN": DEFAULT_TOKEN,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                **UNPACED,
            },
        )
        self.processes: list[ServeProcess] = []

    def start(self, *names: str) -> list[ServeProcess]:
        """Start one ``signoff serve`` per name (in parallel) and wait until each is healthy."""
        started = [ServeProcess(self.world, name, self.reader, self.env) for name in names]
        self.processes += started
        for process in started:
            process.wait_healthy()
        return started

    def wait(
        self, probe: Callable[[], T | None], *, what: str, timeout: float = WAIT_TIMEOUT_S
    ) -> T:
        """Poll ``probe`` until truthy; fail with the database and the logs after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- serve {p.name} (exit {p.process.poll()}):\n{p.output()}"
                    for p in self.processes
                )
                raise AssertionError(
                    f"timed out after {timeout:g}s waiting for {what}\n{self.snapshot()}\n{logs}"
                )
            time.sleep(0.02)

    def snapshot(self) -> str:
        """Describe the runs, their journals, approvals and undelivered notices (diagnostics)."""
        runs, steps, events = models.runs, models.steps, models.events
        approvals, outbox = models.approvals, models.outbox
        with self.reader.store.engine.connect() as conn:
            found = [
                f"run {r.id} {r.status} due={r.due_at} wait={r.wait_key} "
                f"owner={r.lease_owner} fence={r.fence}"
                for r in conn.execute(select(runs))
            ]
            found += [
                f"  step {s.run_id[:8]} #{s.position} {s.kind} {s.name}"
                for s in conn.execute(select(steps).order_by(steps.c.run_id, steps.c.position))
            ]
            found += [f"  event {e.run_id[:8]} {e.key}" for e in conn.execute(select(events))]
            found += [
                f"  approval {a.id} {a.tool} {a.status} v{a.version} consumed={a.consumed_by}"
                for a in conn.execute(select(approvals))
            ]
            found += [
                f"  notice {o.id} {o.key} {o.status} attempts={o.attempts} "
                f"next={o.next_at} claimed={o.claimed_by}/{o.claimed_until} "
                f"error={o.last_error}"
                for o in conn.execute(select(outbox).where(outbox.c.status != "sent"))
            ]
        return "\n".join(found)

    def new_ephemerals(self, user: str, seen: int) -> list[str]:
        """Wait for ephemeral messages to ``user`` beyond the first ``seen``; return them."""
        return self.wait(
            lambda: self.world.ephemerals(user)[seen:], what=f"an ephemeral message to {user}"
        )

    def close(self) -> None:
        """Kill every process, then release the reader's connections."""
        try:
            for process in self.processes:
                process.close()
        finally:
            self.reader.store.engine.dispose()

    # -- what the database says -----------------------------------------------------------

    def status(self, run_id: RunId) -> RunStatus:
        """Return the run's status now."""
        return self.reader.runtime.get(run_id).status

    def outbox_quiet(self) -> bool:
        """Tell whether every queued notice has been delivered (none pending or dead)."""
        with self.reader.store.engine.connect() as conn:
            statuses = list(conn.execute(select(models.outbox.c.status)).scalars())
        return bool(statuses) and all(s == "sent" for s in statuses)

    def waiting_with_cards(
        self, run_id: RunId, tools: tuple[str, ...] = TOOLS[:1]
    ) -> dict[str, Approval]:
        """Wait until the run waits, having asked the approvals of ``tools`` (the refund's, at
        first), and every notice is out in Slack."""

        def probe() -> dict[str, Approval] | None:
            found = approvals_of_reader(self, run_id)
            if (
                self.status(run_id) != RunStatus.WAITING
                or sorted(found) != sorted(tools)
                or not self.outbox_quiet()
            ):
                return None
            return found

        return self.wait(probe, what=f"run {run_id} waiting with its cards delivered")

    def completed(self, run_id: RunId) -> None:
        """Wait until the run completed and all its messages (the final answer too) are out."""
        self.wait(
            lambda: (
                self.status(run_id) in (RunStatus.COMPLETED, RunStatus.FAILED)
                and self.outbox_quiet()
            ),
            what=f"run {run_id} to finish with notices delivered",
        )
        run = self.reader.runtime.get(run_id)
        assert run.status == RunStatus.COMPLETED, (run.status, run.error)


def approvals_of_reader(cluster: Cluster, run_id: str) -> dict[str, Approval]:
    """Return the run's approvals by tool, read by the test process."""
    return {a.tool: a for a in cluster.reader.approvals.store.list_approvals(run_id=run_id)}


@contextmanager
def open_cluster(tmp_path: Path, database_url: str) -> Iterator[Cluster]:
    """The provider, the fake Slack and two approvers on ``database_url``; no serve process
    yet. Every process started is SIGKILLed on exit."""
    with SlackWorld(tmp_path, database_url, approvers=(APPROVER, SECOND_APPROVER)) as world:
        built = Cluster(world, database_url)
        try:
            yield built
        finally:
            built.close()


# -- helpers --------------------------------------------------------------------------------


def acked(ack: Ack) -> Ack:
    """Require Slack's acknowledgement: HTTP 200 within 3 s."""
    assert ack.status == 200, (ack.status, ack.body)
    assert ack.seconds < ACK_LIMIT_S, f"ack took {ack.seconds:.2f}s"
    return ack


def approve_in_turn(
    front: ServeProcess, cluster: Cluster, run_id: RunId, tools: tuple[str, ...] = TOOLS
) -> None:
    """Click Approve through ``front`` on the card of each of ``tools`` in turn, as soon as
    it is posted: the refund's, then the email's (asked once the refund is done)."""
    for tool in tools:
        approval, card = cluster.wait(
            lambda t=tool: posted_card(cluster, run_id, t),  # type: ignore[misc]
            what=f"the {tool} card of run {run_id}",
        )
        acked(front.click(APPROVER, APPROVE, card))
        assert front.decision(approval.id).status == ApprovalStatus.APPROVED


def posted_card(cluster: Cluster, run_id: RunId, tool: str) -> tuple[Approval, Message] | None:
    """Return the run's approval of ``tool`` and its card in the thread, once both exist."""
    approval = approvals_of_reader(cluster, run_id).get(tool)
    cards = (
        []
        if approval is None
        else [m for m in thread_messages(cluster.world, run_id) if is_card_of(m, approval.id)]
    )
    return (approval, cards[0]) if approval is not None and cards else None


def thread_messages(world: SlackWorld, run_id: RunId) -> list[Message]:
    """The run's thread so far (none before its root is posted)."""
    roots = [m for m in world.roots() if f"run:{run_id}" in str(m.blocks)]
    return world.workspace.messages(world.channel, thread_ts=roots[0].ts) if roots else []


def cards_of(world: SlackWorld, approval_id: str) -> list[Message]:
    """Return the approval's card in the thread and in each approver's DM."""
    return [
        world.card(approval_id),
        *(world.card(approval_id, channel=world.dm(user)[0].channel) for user in world.approvers),
    ]


def assert_each_card_updated_once(world: SlackWorld, approvals: list[Approval]) -> None:
    """Every card (thread and DMs) got exactly one successful ``chat.update``, and no other
    message but the runs' root messages (whose status line follows the run) got any."""
    cards = [card for a in approvals for card in cards_of(world, a.id)]
    assert len(cards) == 3 * len(approvals)
    roots = {(root.channel, root.ts) for root in world.roots()}
    updates = Counter(
        (str(c.params["channel"]), str(c.params["ts"])) for c in world.successful("chat.update")
    )
    updates = Counter({where: n for where, n in updates.items() if where not in roots})
    assert updates == Counter({(card.channel, card.ts): 1 for card in cards}), updates
    for card in cards:
        assert buttons(card) == [], "a decided card has no buttons"
        assert len(card.edits) == 1


def assert_posted_once(world: SlackWorld) -> None:
    """No message went to Slack twice."""
    twice = {k: n for k, n in posts_per_message(world).items() if n != 1}
    assert twice == {}, twice


def late_line(verb: str, approval: Approval) -> str:
    """What a late clicker is told: who decided and when."""
    assert approval.decided_by is not None
    assert approval.decided_at is not None
    return (
        f"already {verb} by {approval.decided_by.name} at {approval.decided_at:%Y-%m-%d %H:%M} UTC"
    )


UNTIL_WAITING = ["plan:lookup", "result:lookup_order", "plan:refund", "card:issue_refund"]
"""A demo run's thread up to its refund's approval card."""
COMPLETED_STORY = [
    *UNTIL_WAITING,
    "decided:issue_refund",
    "result:issue_refund",
    "plan:email",
    "card:send_email",
    "decided:send_email",
    "result:send_email",
    "done",
]
"""A demo run's thread: the email telling of the refund is asked once the refund is done."""


def assert_completed_story(shape: list[str]) -> None:
    """The thread of a demo run, its refund and then its email approved."""
    assert shape == COMPLETED_STORY, shape


def thread_shape(world: SlackWorld, run_id: str) -> list[str]:
    """Classify each reply of the run's thread, in thread order."""
    shapes = []
    for reply in world.replies(run_id):
        text = reply.text
        if text.startswith("🤖 Plans: `lookup_order`"):
            shapes.append("plan:lookup")
        elif text.startswith("🤖 Plans: `issue_refund`"):
            shapes.append("plan:refund")
        elif text.startswith("🤖 Plans: `send_email`"):
            shapes.append("plan:email")
        elif text.startswith("🔧 `"):
            shapes.append("result:" + text.split("`")[1])
        elif text.startswith("*") and ": ✅ Approved by" in text:
            shapes.append("decided:" + text.split("*")[1])
        elif text == f"✅ *Done:* {ANSWER}":
            shapes.append("done")
        elif (
            any(b.get("block_id", "").startswith("approval:") for b in reply.blocks or [])
            or reply.edits
        ):
            tool = next(
                t for t in TOOLS if t in (reply.edits[0].text if reply.edits else reply.text)
            )
            shapes.append("card:" + tool)
        else:
            shapes.append("?" + text[:80])
    return shapes
