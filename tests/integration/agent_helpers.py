"""Helpers for the agent integration tests: the demo provider as a process, agent settings,
fast run probes, ledger queries, a counting agent for budget tests and a barrier runner.

``counting_agent`` is loaded by worker subprocesses through
``SIGNOFF_AGENT=tests.integration.agent_helpers:counting_agent``: a scripted model that
asks for ``tick`` ``TICKS`` times and then answers, logging every real model invocation
(and every tool execution) to the files the environment names, so a test can count what
really ran across processes, crashes included.

``python -m tests.integration.agent_helpers launcher`` is the ``Launcher``: it forks
``signoff`` commands from an interpreter that has already imported them.

``python -m tests.integration.agent_helpers BARRIER ARGS...`` imports the command line,
creates ``BARRIER.ready.<pid>``, waits until ``BARRIER`` exists and then runs
``signoff ARGS...`` in this process (the very ``bot.cli.main:main`` the ``signoff`` script runs):
the way to make several ``signoff`` processes act at the same moment.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, Protocol

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
from tests.integration import REPO_ROOT, WorkerProcess, signoff_command, signoff_env, wait_until

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
            libpq = url.set(drivername="postgresql").render_as_string(hide_password=False)
            self._connection = psycopg.connect(libpq, autocommit=True)
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


# --- worker processes: the ``signoff`` script, or forked from a warm launcher ---------------


class Worker(Protocol):
    """A ``signoff worker`` process the crash tests can kill."""

    @property
    def pid(self) -> int:
        """The process id."""

    def running(self) -> bool:
        """Tell whether the process is still alive."""

    def sigkill(self) -> None:
        """SIGKILL it and wait until it is gone."""

    def stop(self) -> int:
        """SIGTERM it and return its exit status once it has exited."""

    def output(self) -> str:
        """What it has logged."""

    def close(self) -> None:
        """Make sure it is gone (SIGKILL if need be) and release its resources."""


class ScriptWorker:
    """``signoff worker`` started from the ``signoff`` script: a fresh interpreter."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self._process = WorkerProcess(env, log, concurrency=1)

    @property
    def pid(self) -> int:
        """The process id."""
        return self._process.pid

    def running(self) -> bool:
        """Tell whether the process is still alive."""
        return self._process.process.poll() is None

    def sigkill(self) -> None:
        """SIGKILL it and reap it."""
        self._process.sigkill()

    def stop(self) -> int:
        """SIGTERM it and return its exit status."""
        return self._process.stop()

    def output(self) -> str:
        """What it has logged."""
        return self._process.output()

    def close(self) -> None:
        """Kill it if alive and reap it."""
        self._process.__exit__(None, None, None)


class Launcher:
    """A process that has imported the command line once and forks ``signoff`` commands.

    Each command runs in a forked child, a process of its own: ``bot.cli.main.main(args)`` —
    the function the ``signoff`` script calls — with the environment given, its output in
    a log file and its exit status in ``<log>.exit``. Forking skips only the interpreter
    start and the imports (about 0.6 s of CPU a worker), which lets the crash tests kill
    workers many times within their time budget. The launcher ignores SIGCHLD, so the
    kernel reaps its children as they die.
    """

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.agent_helpers", "launcher"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdin is not None
        self._in, self._out = self.process.stdin, self.process.stdout
        assert self._out.readline().strip() == "ready", "the launcher did not start"

    def spawn(self, env: dict[str, str], log: Path, *args: str) -> int:
        """Fork ``signoff args`` with ``env``, logging to ``log``; return its process id."""
        request = json.dumps({"env": env, "log": str(log), "args": list(args)})
        with self._lock:
            self._in.write(request + "\n")
            self._in.flush()
            return int(self._out.readline())

    def run(self, env: dict[str, str], log: Path, *args: str) -> tuple[int, str]:
        """Fork ``signoff args``, wait for it to exit; return its exit status and output."""
        child = ForkedWorker(self.spawn(env, log, *args), log)
        wait_until(
            lambda: not child.running(),
            timeout=60,
            interval=0.005,
            what=f"signoff {' '.join(args)}",
        )
        return child.exit_status(), child.output()

    def worker(self, env: dict[str, str], log: Path) -> ForkedWorker:
        """Fork ``signoff worker --concurrency 1``."""
        return ForkedWorker(self.spawn(env, log, "worker", "--concurrency", "1"), log)

    def close(self) -> None:
        """Stop the launcher (its children are on their own: close them first)."""
        self._in.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self._out.close()

    def __enter__(self) -> Launcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class ForkedWorker:
    """A ``signoff`` command (a worker, mostly) forked by a ``Launcher``."""

    def __init__(self, pid: int, log: Path) -> None:
        self._pid = pid
        self.log = log

    @property
    def pid(self) -> int:
        """The process id."""
        return self._pid

    def running(self) -> bool:
        """Tell whether the process is still alive."""
        try:
            os.kill(self._pid, 0)
        except ProcessLookupError:
            return False
        return True

    def sigkill(self) -> None:
        """SIGKILL it and wait until the kernel has reaped it."""
        with suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)
        wait_until(
            lambda: not self.running(),
            timeout=30,
            interval=0.001,
            what=f"worker {self._pid} to die",
        )

    def stop(self) -> int:
        """SIGTERM it and return the exit status it recorded."""
        os.kill(self._pid, signal.SIGTERM)
        wait_until(lambda: not self.running(), timeout=30, what=f"worker {self._pid} to stop")
        return self.exit_status()

    def exit_status(self) -> int:
        """The exit status it recorded (-1 if it recorded none: it was killed)."""
        status = Path(f"{self.log}.exit")
        return int(status.read_text(encoding="utf-8")) if status.exists() else -1

    def output(self) -> str:
        """What it has logged."""
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def close(self) -> None:
        """SIGKILL it if it is still alive."""
        if self.running():
            self.sigkill()


FORKED_COMMANDS_IMPORT = (
    "bot.app.jobs",
    "bot.app.scheduler",
    "bot.ops.http",
    "bot.ops.logs",
    "bot.ops.supervision",
    "devkit.demo.agent",
    "devkit.demo.workflows",
)
"""What the commands the launcher forks (``worker``, ``approve``) import as they run, beyond
what this module imports: the command line imports each command's modules only then."""


def launcher_main() -> int:
    """Import everything a command needs, then fork one child per request on stdin."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    from bot.cli import main as cli

    for name in FORKED_COMMANDS_IMPORT:
        importlib.import_module(name)
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(cli.main, request)
        print(pid, flush=True)
    return 0


def _child(main: Callable[[list[str]], int], request: dict[str, Any]) -> NoReturn:
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        os.environ.clear()
        os.environ.update(request["env"])
        code = main(request["args"])
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
            Path(f"{request['log']}.exit").write_text(str(code), encoding="utf-8")
        os._exit(code)


# --- a barrier for simultaneous ``signoff`` processes ---------------------------------------


def barrier_main(argv: list[str]) -> int:
    """Build the services, say ready, wait for the barrier file, run ``signoff argv[1:]``.

    The services are built before the barrier — the very ``build_services`` call the
    command makes, handed to it — so that what runs after the barrier is the command
    itself, and racing processes reach the database at the same moment.
    """
    barrier, args = Path(argv[0]), argv[1:]
    from bot.app import wiring
    from bot.cli import main as cli

    services = build_services(Settings.from_env())
    vars(wiring)["build_services"] = lambda settings, **_: services
    Path(f"{barrier}.ready.{os.getpid()}").write_text("ready", encoding="utf-8")
    deadline = time.monotonic() + 60
    while not barrier.exists():
        if time.monotonic() > deadline:
            return 99
        time.sleep(0.0005)
    return cli.main(args)


if __name__ == "__main__":
    sys.exit(launcher_main() if sys.argv[1:] == ["launcher"] else barrier_main(sys.argv[1:]))
