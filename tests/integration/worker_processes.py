"""``signoff`` processes for the agent integration tests: workers from the ``signoff``
script or forked from a warm launcher, and a barrier for simultaneous commands.

``python -m tests.integration.worker_processes launcher`` is the ``Launcher``: it forks
``signoff`` commands from an interpreter that has already imported them.

``python -m tests.integration.worker_processes BARRIER ARGS...`` imports the command line,
creates ``BARRIER.ready.<pid>``, waits until ``BARRIER`` exists and then runs
``signoff ARGS...`` in this process (the very ``bot.cli.main:main`` the ``signoff`` script runs):
the way to make several ``signoff`` processes act at the same moment.
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, Protocol

from bot.app.settings import Settings
from bot.app.wiring import build_services
from tests.integration import REPO_ROOT, WorkerProcess, wait_until

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
        self._logs = itertools.count()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.worker_processes", "launcher"],
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
        """Fork ``signoff args``, wait for it to exit; return its exit status and output.
        One that has not exited in time is killed, not left running after the test."""
        child = ForkedWorker(self.spawn(env, log, *args), log)
        try:
            wait_until(
                lambda: not child.running(),
                timeout=60,
                interval=0.005,
                what=f"signoff {' '.join(args)}",
            )
        finally:
            child.close()
        return child.exit_status(), child.output()

    def work(self, env: dict[str, str], logs: Path) -> None:
        """Fork ``signoff worker --until-idle``, logging to a new file in ``logs``, and wait
        for it to exit 0."""
        code, output = self.run(
            env, logs / f"until-idle-{next(self._logs)}.log", "worker", "--until-idle"
        )
        assert code == 0, f"signoff worker --until-idle -> {code}\n{output}"

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
