"""A worker child process that restarts by itself: ``signoff dev``'s ``signoff worker``.

The child runs in its own session, so a Ctrl-C in the terminal reaches only ``signoff dev``,
which then stops it (SIGTERM, then SIGKILL after a grace period). On Linux it is also asked
to receive SIGTERM should ``signoff dev`` die without stopping it.
"""

from __future__ import annotations

import ctypes
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bot.app.processes import stop_process

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
RESTART_DELAY_S = 0.3
MAX_RESTART_DELAY_S = 5.0
QUICK_EXIT_S = 2.0


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """The worker child as the dev panel shows it."""

    pid: int | None
    alive: bool
    restarts: int
    last_exit: int | None
    uptime_s: float | None


def worker_command(concurrency: int = 4) -> list[str]:
    """Return ``signoff worker`` for this Python (``python -m bot.cli.main worker``)."""
    return [sys.executable, "-m", "bot.cli.main", "worker", "--concurrency", str(concurrency)]


class WorkerSupervisor:
    """Keeps one child process running; restarts it whenever it exits until ``stop()``."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        log_path: Path,
        cwd: Path | None = None,
        stop_timeout: float = 15.0,
    ) -> None:
        self._argv = list(argv)
        self._env = dict(env)
        self._log_path = log_path
        self._cwd = cwd
        self._stop_timeout = stop_timeout
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._restarts = 0
        self._last_exit: int | None = None
        self._started_at: float | None = None
        self._thread = threading.Thread(
            target=self._supervise, name="signoff-dev-worker", daemon=True
        )
        self._preexec = _die_with_parent()

    def start(self) -> None:
        """Start the child and keep it running."""
        with self._lock:
            self._spawn_locked()
        self._thread.start()

    def status(self) -> WorkerStatus:
        """Return the current child's pid, whether it runs, and how often it was restarted."""
        with self._lock:
            proc = self._proc
            alive = proc is not None and proc.poll() is None
            uptime = (
                time.monotonic() - self._started_at
                if alive and self._started_at is not None
                else None
            )
            return WorkerStatus(
                pid=None if proc is None else proc.pid,
                alive=alive,
                restarts=self._restarts,
                last_exit=self._last_exit,
                uptime_s=uptime,
            )

    def kill(self) -> int | None:
        """SIGKILL the child at once (it is restarted); return its pid, or None if none ran."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                return None
            proc.kill()
            logger.info("killed the worker (SIGKILL)", extra={"action": f"pid {proc.pid}"})
            return proc.pid

    def stop(self) -> None:
        """Stop restarting; SIGTERM the child, SIGKILL it after the grace period; wait."""
        self._stopping.set()
        with self._lock:
            proc = self._proc
        if proc is not None:
            stop_process(proc, self._stop_timeout)
        if self._thread.is_alive():
            self._thread.join(self._stop_timeout)

    def _supervise(self) -> None:
        delay = RESTART_DELAY_S
        while True:
            with self._lock:
                proc = self._proc
                started = self._started_at or time.monotonic()
            if proc is None:
                return
            code = proc.wait()
            with self._lock:
                self._last_exit = code
            if self._stopping.is_set():
                return
            quick = time.monotonic() - started < QUICK_EXIT_S
            delay = min(delay * 2, MAX_RESTART_DELAY_S) if quick else RESTART_DELAY_S
            logger.warning(
                "the worker exited; restarting it", extra={"action": f"pid {proc.pid} exit {code}"}
            )
            if self._stopping.wait(delay):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                self._restarts += 1
                self._spawn_locked()

    def _spawn_locked(self) -> None:
        log_file: IO[bytes] = self._log_path.open("ab")
        try:
            self._proc = subprocess.Popen(
                self._argv,
                env=self._env,
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self._preexec,
            )  # only calls prctl, resolved before the fork
        finally:
            log_file.close()
        self._started_at = time.monotonic()
        logger.info("worker started", extra={"action": f"pid {self._proc.pid}"})


def _die_with_parent() -> Callable[[], None] | None:
    """On Linux: a pre-exec hook asking the kernel to SIGTERM the child if we die first."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))

    return hook
