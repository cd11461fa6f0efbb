"""Integration tests: real ``signoff`` processes on real databases.

Shared helpers live here: the environment of a ``signoff`` subprocess, running the
command line, a worker process that is always reaped, polling with a deadline, and
reading the effect files the tests assert on.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository root: put on the subprocesses' PYTHONPATH so they can import ``tests.flows``."""

TEST_WORKFLOWS = "tests.flows:workflows"
CLI_TIMEOUT_S = 60.0


def signoff_command() -> list[str]:
    """Return the command a user runs: the ``signoff`` script next to this Python."""
    script = Path(sys.executable).with_name("signoff")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "bot.cli.main"]


def signoff_env(
    database_url: str,
    *,
    lease_ttl: float = 1.0,
    poll_interval: float = 0.1,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Return the environment of a ``signoff`` process on ``database_url`` with the test flows
    and the demo (its agent, workflows and approver)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    python_path = [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])]
    env.update(
        PYTHONPATH=os.pathsep.join(python_path),
        SIGNOFF_DATABASE_URL=database_url,
        SIGNOFF_WORKFLOWS=TEST_WORKFLOWS,
        SIGNOFF_DEMO="1",
        SIGNOFF_LEASE_TTL_SECONDS=str(lease_ttl),
        SIGNOFF_POLL_INTERVAL_SECONDS=str(poll_interval),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra or {})
    return env


def run_cli(
    env: dict[str, str], *args: str, cwd: Path | None = None, stdin: int | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``signoff <args>`` to completion (``stdin``: as ``subprocess.run`` takes it) and
    return its exit status and output."""
    return subprocess.run(
        [*signoff_command(), *args],
        env=env,
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def cli_ok(env: dict[str, str], *args: str) -> str:
    """Run ``signoff <args>``, require exit status 0 and return its stdout."""
    done = run_cli(env, *args)
    assert done.returncode == 0, f"signoff {' '.join(args)} -> {done.returncode}\n{done.stderr}"
    return done.stdout


class WorkerProcess:
    """A ``signoff worker`` subprocess, killed and reaped on exit from its ``with`` block."""

    def __init__(self, env: dict[str, str], log: Path, *args: str, concurrency: int = 4) -> None:
        self.log = log
        self._handle = log.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [*signoff_command(), "worker", "--concurrency", str(concurrency), *args],
            env=env,
            cwd=log.parent,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        """Return the worker's process id."""
        return self.process.pid

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._handle.close()

    def sigkill(self) -> None:
        """Kill the worker with SIGKILL and wait until it is gone."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 30.0) -> int:
        """Send SIGTERM and return the exit status once the worker has exited."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def output(self) -> str:
        """Return what the worker has logged so far."""
        self._handle.flush()
        return self.log.read_text(encoding="utf-8", errors="replace")

    def ops_port(self, timeout: float = 30.0) -> int:
        """The port of its operator endpoints (started with ``--metrics-port 0``)."""
        return bound_port(self.log, "/", timeout=timeout, alive=self.assert_alive)

    def assert_alive(self) -> None:
        """Fail with the worker's log if it has exited."""
        code = self.process.poll()
        assert code is None, f"worker exited early with {code}:\n{self.output()}"


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.05,
    alive: WorkerProcess | None = None,
) -> T:
    """Call ``probe`` until it returns a truthy value and return it; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if alive is not None:
            alive.assert_alive()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def bound_port(
    log: Path, path: str, *, timeout: float, alive: Callable[[], object] | None = None
) -> int:
    """Wait until the process logging to ``log``, given port 0, logs the URL of ``path`` on
    the port it was given (``/slack/events``, or ``/`` for its operator endpoints), and
    return that port (``alive`` fails the wait if the process has exited)."""
    url = re.compile(rf"http://[^\s/\"]+:(\d+){re.escape(path)}(?=[\s\"]|$)", re.MULTILINE)

    def found() -> int | None:
        if alive is not None:
            alive()
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        match = url.search(text)
        return int(match.group(1)) if match else None

    return wait_until(found, timeout=timeout, what=f"the port of {path} in {log.name}")


def lines(path: Path) -> list[str]:
    """Return the lines of an effect file (none if it does not exist yet)."""
    if not path.exists():
        return []
    return path.read_text(encoding="utf-8").splitlines()


def owner_pid(owner: str | None) -> int | None:
    """Return the process id inside a worker's lease owner name (``host:pid:suffix``)."""
    if owner is None:
        return None
    return int(owner.split(":")[-2])


def demo_input(path: Path, n: int, delay_ms: int) -> dict[str, Any]:
    """Return the input of a ``demo.steps`` run writing to ``path``."""
    return {"n": n, "delay_ms": delay_ms, "path": str(path)}


def expected_steps(n: int) -> list[str]:
    """Return the lines ``demo.steps`` writes when each step ran exactly once."""
    return [f"step {i}" for i in range(1, n + 1)]
