"""Helpers for the agent integration tests: the demo provider as a process, agent settings,
fast run probes, ledger queries and a counting agent for budget tests (the worker processes
and the barrier runner are in ``worker_processes``).

``counting_agent`` is loaded by worker subprocesses through
``SIGNOFF_AGENT=tests.integration.agent_helpers:counting_agent``: a scripted model that
asks for ``tick`` ``TICKS`` times and then answers, logging every real model invocation
(and every tool execution) to the files the environment names, so a test can count what
really ran across processes, crashes included.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from agent_runtime import (
    NO_RETRY,
    Actor,
    Agent,
    AgentInput,
    Budget,
    RunId,
    RunStatus,
    StepRecord,
    Tools,
    tool,
)
from agent_runtime.models import ModelRequest, ModelResponse, ScriptedModel, ToolCall
from agent_runtime.models.scripted import text_reply, tool_reply
from bot.app.processes import stop_process
from bot.app.settings import Settings
from bot.app.wiring import Services, build_services
from devkit.demo.ledger_cli import fetch_ledger
from store.engine import POOLING
from tests.integration import signoff_command, signoff_env, wait_until

TASK = "refund order 1042 and email the customer"
APPROVER = "U_DANA"
REQUESTER = "U_REQ"
OUTSIDER = "U_EVE"

MODEL_LOG_ENV = "SIGNOFF_TEST_MODEL_LOG"
MODEL_DELAY_ENV = "SIGNOFF_TEST_MODEL_DELAY_S"
TOOL_LOG_ENV = "SIGNOFF_TEST_TOOL_LOG"
COUNTING_AGENT = "tests.integration.agent_helpers:counting_agent"
TICKS = 4
"""The counting agent's tool turns before its answer: TICKS + 1 model calls in all."""
COUNTING_MODEL_CALLS = 3
"""The counting agent's model-call budget: it runs out before the answer."""


# --- the demo provider as a process -------------------------------------------------------


class DemoProvider:
    """``signoff demo provider --port 0`` in a subprocess; stopped on exit from ``with``."""

    def __init__(
        self, directory: Path, *, pause_file: Path | None = None, name: str = "provider"
    ) -> None:
        self.ledger_path = directory / f"{name}-ledger.db"
        self.log = directory / f"{name}.log"
        self.pause_file = pause_file
        args = ["demo", "provider", "--port", "0", "--ledger", str(self.ledger_path)]
        if pause_file is not None:
            args += ["--pause-after-charge-file", str(pause_file)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
        self._handle = self.log.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [*signoff_command(), *args], env=env, stdout=self._handle, stderr=subprocess.STDOUT
        )
        try:
            self.url = wait_until(self._listening, timeout=30, what="the demo provider")
        except BaseException:
            self.stop()
            raise

    def _listening(self) -> str | None:
        code = self.process.poll()
        text = self.log.read_text(encoding="utf-8", errors="replace")
        assert code is None, f"demo provider exited with {code}:\n{text}"
        found = re.search(r"listening on (http://\S+)", text)
        return found.group(1) if found else None

    def ledger(self) -> list[dict[str, Any]]:
        """Return every request the provider received, oldest first (``GET /ledger``)."""
        return fetch_ledger(self.url)

    def arm_pause(self) -> None:
        """Make the next new charge hold its answer until ``pause_file`` is deleted."""
        assert self.pause_file is not None
        Path(f"{self.pause_file}.arm").write_text("armed", encoding="utf-8")

    def stop(self) -> None:
        """End any pause, stop the provider (SIGTERM, then SIGKILL) and reap it."""
        if self.pause_file is not None:
            self.pause_file.unlink(missing_ok=True)
        stop_process(self.process)
        self._handle.close()

    def __enter__(self) -> DemoProvider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def refund_requests(entries: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """Return the run's ``POST /v1/refunds`` ledger entries (its keys name the run)."""
    return [
        e
        for e in entries
        if e["method"] == "POST"
        and e["path"] == "/v1/refunds"
        and (e["idempotency_key"] or "").startswith(f"signoff-{run_id}-")
    ]


def email_requests(entries: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """Return the run's ``POST /v1/emails`` ledger entries."""
    return [
        e
        for e in entries
        if e["method"] == "POST"
        and e["path"] == "/v1/emails"
        and (e["idempotency_key"] or "").startswith(f"signoff-{run_id}-")
    ]


def all_refund_requests(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return every ``POST /v1/refunds`` the provider received."""
    return [e for e in entries if e["method"] == "POST" and e["path"] == "/v1/refunds"]


# --- settings, services and probes --------------------------------------------------------


def agent_env(
    database_url: str,
    provider_url: str,
    *,
    lease_ttl: float = 0.5,
    poll_interval: float = 0.05,
    approvers: str = APPROVER,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """Return the environment of a ``signoff`` process running the demo agent."""
    return signoff_env(
        database_url,
        lease_ttl=lease_ttl,
        poll_interval=poll_interval,
        extra={
            "SIGNOFF_DEMO_PROVIDER_URL": provider_url,
            "SIGNOFF_APPROVERS": approvers,
            **(extra or {}),
        },
    )


def settings_of(env: dict[str, str]) -> Settings:
    """Return the settings a ``signoff`` process with ``env`` reads."""
    return Settings.from_env({k: v for k, v in env.items() if k.startswith("SIGNOFF_")})


_MIGRATING = threading.Lock()
"""Alembic keeps its migration context in module globals: one upgrade at a time per process."""


@contextmanager
def services_for(env: dict[str, str]) -> Iterator[Services]:
    """The services a ``signoff`` process with ``env`` builds, in this process."""
    with _MIGRATING:
        services = build_services(settings_of(env))
    try:
        yield services
    finally:
        services.store.engine.dispose()


def start_demo_run(services: Services, *, budget: Budget | None = None, task: str = TASK) -> RunId:
    """Start a demo-agent run as ``REQUESTER`` (what ``signoff run`` does)."""
    agent = services.agents.get("demo")
    data = AgentInput(task=task, requester=Actor(user_id=REQUESTER), budget=budget).to_json()
    return services.runtime.start(agent.workflow, data).id


def pending_refund(env: dict[str, str]) -> tuple[RunId, str]:
    """A demo-agent run waiting on a pending approval of its refund, in ``env``'s database:
    the run's id and the approval's id."""
    with services_for(env) as services:
        agent = services.agents.get("demo")
        refund = agent.tools.get("issue_refund")
        assert refund is not None
        assert refund.approval is not None
        requester = Actor(user_id="U_RITA")
        run = services.runtime.start(
            agent.workflow, AgentInput(task="refund order 1042", requester=requester).to_json()
        )
        approval = services.approvals.request(
            run_id=run.id,
            position=1,
            tool=refund,
            args={"order_id": "1042", "amount_cents": 4999},
            policy=refund.approval.snapshot(agent.approver_groups),
            requester=requester,
            now=datetime.now(UTC),
        )
    return run.id, approval.id


@dataclass(frozen=True)
class RunState:
    """A run row as a probe sees it."""

    status: RunStatus
    lease_owner: str | None
    fence: int
    wait_key: str | None
    journal: int

    @property
    def holder_pid(self) -> int | None:
        """The process id of the worker holding the lease, if any."""
        return None if self.lease_owner is None else int(self.lease_owner.split(":")[-2])


class RunProbe:
    """Reads a run's row and journal length cheaply and without taking any write lock.

    The tests poll every millisecond or two, from several threads: the store's SQLite
    engine would begin every read IMMEDIATE (the write lock) and SQLAlchemy would cost a
    quarter of a millisecond a probe. This reads through the bare driver, in autocommit.
    """

    _QUERY = (
        "SELECT status, lease_owner, fence, wait_key, "
        "(SELECT count(*) FROM steps WHERE run_id = {p}) FROM runs WHERE id = {p}"
    )

    def __init__(self, database_url: str) -> None:
        url = make_url(database_url)
        self._connection: Any
        if url.get_backend_name() == "sqlite":
            assert url.database
            self._connection = sqlite3.connect(
                url.database, timeout=30, isolation_level=None, check_same_thread=False
            )
            self._query = self._QUERY.format(p="?")
            self._uuid = False
        else:
            libpq = url.set(drivername="postgresql").difference_update_query([POOLING])
            self._connection = psycopg.connect(  # by the URL's way (a pooler's, say)
                libpq.render_as_string(hide_password=False), autocommit=True, prepare_threshold=None
            )
            self._query = self._QUERY.format(p="%s::uuid")
            self._uuid = True

    def state(self, run_id: str) -> RunState:
        """Return the run's status, lease, fence, wait key and journal length now."""
        key = str(uuid.UUID(hex=run_id)) if self._uuid else run_id
        row = self._connection.execute(self._query, (key, key)).fetchone()
        assert row is not None, f"no run {run_id}"
        status, owner, fence, wait_key, count = row
        return RunState(RunStatus(status), owner, fence, wait_key, count)

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()


def named(journal: list[StepRecord], name: str) -> list[StepRecord]:
    """Return the journal entries called ``name``."""
    return [s for s in journal if s.name == name]


def model_steps(journal: list[StepRecord]) -> list[StepRecord]:
    """Return the journaled (successful) model calls."""
    return [s for s in journal if s.name == "model" and s.error is None]


def log_lines(path: Path) -> list[str]:
    """Return the lines of a log file (none if it does not exist yet)."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


# --- the counting agent (loaded by workers through SIGNOFF_AGENT) ----------------------------


def _append_line(variable: str, line: str) -> None:
    path = os.environ.get(variable)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _respond(request: ModelRequest) -> ModelResponse:
    """Ask for the next tick until there have been ``TICKS``, then answer."""
    done = sum(1 for m in request.messages if m.role == "tool")
    _append_line(MODEL_LOG_ENV, f"call {done + 1} pid {os.getpid()}")
    time.sleep(float(os.environ.get(MODEL_DELAY_ENV) or 0))
    if done < TICKS:
        return tool_reply(ToolCall(id=f"tick-{done + 1}", name="tick", arguments={"n": done + 1}))
    return text_reply(f"counted to {done}")


def tick(n: int) -> dict[str, Any]:
    """Count one tick.

    Args:
        n: The tick's number.
    """
    _append_line(TOOL_LOG_ENV, f"tick {n} pid {os.getpid()}")
    # keys in neither sorted nor jsonb (shortest first) order: replay must not care
    return {"tick": n, "of": TICKS, "a_note": f"tick {n} of {TICKS}"}


def counting_agent() -> Agent:
    """Return the counting agent: a model-call budget smaller than its work needs."""
    return Agent(
        name="counter",
        model=ScriptedModel(_respond, name="counting-scripted"),
        system_prompt="Count ticks, then say how many.",
        tools=Tools(tool(tick)),
        budget=Budget(model_calls=COUNTING_MODEL_CALLS),
        budget_approvers=(APPROVER,),
        model_retry=NO_RETRY,
    )
