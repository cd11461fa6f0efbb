"""The chaos suite's processes: ``signoff serve`` and ``signoff worker`` with kill points.

Each member runs ``python -m bench.kill_points --armed serve|worker`` with a kill file of its
own; a member that died (at a kill point, or otherwise) is started again at once, as a new
generation with a fresh kill file, as a supervisor (systemd, Kubernetes) would.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from bench.kill_points import ARMED_FLAG, KILL_FILE_ENV, write_plan
from bot.app.processes import stop_process
from bot.app.wiring import Services
from tests.integration.serve_cluster import ServeProcess
from tests.integration.slack_harness import SlackWorld

CHAOS_COMMAND = (sys.executable, "-m", "bench.kill_points", ARMED_FLAG)
HEALTH_PROBE_S = 0.2


@dataclass(frozen=True)
class Death:
    """A member that died: its name, when the death was seen, and the point that fired."""

    name: str
    seen_at: float
    point: str | None
    log: str
    code: int | None
    """The exit status (negative: the signal that ended it)."""


class WorkerProcess:
    """``signoff worker`` with kill points, logging to a file."""

    def __init__(self, directory: Path, name: str, env: dict[str, str]) -> None:
        self.log = directory / f"worker-{name}.log"
        self._log = self.log.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [*CHAOS_COMMAND, "worker", "--concurrency", "2"],
            env=env,
            cwd=directory,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def close(self) -> None:
        """Stop it (SIGTERM, then SIGKILL) and close its log."""
        stop_process(self.process)
        self._log.close()


class Member:
    """One role of the fleet (serve A, worker 1…), whatever generation runs it now."""

    def __init__(self, fleet: Fleet, name: str, serve: bool) -> None:
        self.fleet = fleet
        self.name = name
        self.serve = serve
        self.generation = 0
        self.healthy = False
        self.kill_file = Path()
        self.process: ServeProcess | WorkerProcess | None = None
        self.start()

    def start(self) -> None:
        """Start the next generation, unarmed."""
        self.generation += 1
        label = f"{self.name}{self.generation}"
        self.kill_file = self.fleet.directory / f"kill-{label}.json"
        env = {**self.fleet.env, KILL_FILE_ENV: str(self.kill_file)}
        if self.serve:
            world, reader = self.fleet.world, self.fleet.reader
            self.process = ServeProcess(world, label, reader, env, command=CHAOS_COMMAND)
            self.healthy = False
        else:
            self.process = WorkerProcess(self.fleet.directory, label, env)
            self.healthy = True

    def died(self) -> Death | None:
        """If the process has exited, say how and start the next generation."""
        assert self.process is not None
        if self.process.process.poll() is None:
            return None
        fired = Path(f"{self.kill_file}.fired")
        point = fired.read_text(encoding="utf-8") if fired.exists() else None
        seen, code = time.monotonic(), self.process.process.returncode
        self.process.close()
        log = self.process.log.read_text(encoding="utf-8", errors="replace")[-4000:]
        death = Death(f"{self.name}{self.generation}", seen, point, log, code)
        self.start()
        return death

    def front(self) -> ServeProcess | None:
        """This member's serve process if ``/healthz`` says it is up (a quick probe)."""
        if not isinstance(self.process, ServeProcess):
            return None
        if not self.healthy:
            try:
                answer = requests.get(self.process.health_url, timeout=HEALTH_PROBE_S)
                self.healthy = answer.status_code == 200 and answer.json()["status"] == "ok"
            except requests.RequestException:
                return None
        return self.process if self.healthy else None

    def arm(self, point: str, hit: int) -> None:
        """Make the running generation die at the ``hit``-th arrival at ``point``."""
        write_plan(self.kill_file, point, hit)

    def close(self) -> None:
        """Kill the running generation."""
        if self.process is not None:
            self.process.close()


class Fleet:
    """Two ``signoff serve`` (A, B) and ``workers`` ``signoff worker`` on one database."""

    def __init__(
        self,
        world: SlackWorld,
        reader: Services,
        env: dict[str, str],
        directory: Path,
        workers: int,
    ) -> None:
        self.world = world
        self.reader = reader
        self.env = env
        self.directory = directory
        self.members: list[Member] = []
        for name in ("A", "B"):
            self.members.append(Member(self, name, serve=True))
        for index in range(workers):
            self.members.append(Member(self, f"W{index + 1}", serve=False))

    def deaths(self) -> list[Death]:
        """Every member that died since the last call (each already restarted)."""
        return [d for m in self.members if (d := m.died()) is not None]

    def fronts(self) -> list[ServeProcess]:
        """The serve processes that answer now."""
        return [p for m in self.members if (p := m.front()) is not None]

    def arm(self, point: str, hit: int) -> None:
        """Arm every member at ``point`` (the first to reach it dies)."""
        for member in self.members:
            member.arm(point, hit)

    def disarm(self) -> None:
        """Disarm every member."""
        for member in self.members:
            member.arm("", 1)

    def logs(self) -> str:
        """The tail of every running member's log (diagnostics)."""
        found = []
        for member in self.members:
            if member.process is not None:
                text = member.process.log.read_text(encoding="utf-8", errors="replace")
                found.append(f"--- {member.name}{member.generation}:\n{text[-3000:]}")
        return "\n".join(found)

    def close(self) -> None:
        """Kill every member."""
        for member in self.members:
            member.close()
