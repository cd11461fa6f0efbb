"""When each run promised in an ``/agent`` ack was created, by which process and which path.

A serve process acks ``/agent`` with the id of a run it creates just after; if it cannot, any
serve's intake sweep creates it once the promise is ``INTAKE_GRACE`` old (see
``bot.slack.intake``). ``Starts`` follows each promise from the ack to the run's row (its
``created_at``), and for a run created late reads the fleet's logs for who created it (the
line each path logs) and lists the deaths in between, so that a late start explains itself.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.chaos_fleet import Death
from bench.chaos_tally import Probe

LATE_S = 5.0
"""A run created this long after its ack is reported with how it came to be created."""
EXPLAIN_S = 10.0
"""How long after a late run's creation its creator's line is looked for in the logs."""
PATHS = {
    "acknowledged run started after its ack": "after the ack",
    "acknowledged run started by the sweep": "intake sweep",
}
"""The line each path logs when it creates a promised run, and the path's name."""


@dataclass
class Start:
    """One promised run: who acked it and when, and when and how its row was created."""

    run_id: str
    acked_by: str
    acked_at: float
    """Wall-clock seconds (``time.time()``), comparable with the run's ``created_at``."""
    created_at: float | None = None
    by: str = "?"
    """The process whose log says it created the run (``?``: it died before logging)."""
    path: str = "?"
    deaths: list[str] = field(default_factory=list)
    """The deaths seen between the ack and the run's creation."""

    @property
    def delay(self) -> float | None:
        """Seconds from the ack to the run's creation (None while it does not exist)."""
        return None if self.created_at is None else self.created_at - self.acked_at

    def describe(self, now: float | None = None) -> str:
        """One line: the run, its ack, its creation (or its wait so far), the deaths between."""
        if self.delay is None:
            waited = (time.time() if now is None else now) - self.acked_at
            told = f"not created {waited:.1f} s after its ack by {self.acked_by}"
        else:
            told = (
                f"created {self.delay:.1f} s after its ack by {self.acked_by}, "
                f"by {self.by} ({self.path})"
            )
        deaths = f"; deaths between: {', '.join(self.deaths)}" if self.deaths else ""
        return f"run {self.run_id} {told}{deaths}"


class Starts:
    """Every promise of a chaos session, read from the database and the fleet's logs."""

    def __init__(self, probe: Probe, logs: Path) -> None:
        self.probe = probe
        self.logs = logs
        self.all: list[Start] = []
        self._unexplained: list[Start] = []

    def acked(self, run_id: str, front: str) -> None:
        """Note that ``front`` acked ``/agent`` with the promise of ``run_id`` just now."""
        self.all.append(Start(run_id, front, time.time()))

    def died(self, death: Death) -> None:
        """Note a death against every promise not kept yet."""
        where = death.point or f"exit {death.code}"
        for start in self.waiting():
            start.deaths.append(f"{death.name} ({where})")

    def waiting(self) -> list[Start]:
        """The promises whose run does not exist yet."""
        return [start for start in self.all if start.created_at is None]

    def check(self) -> list[Start]:
        """Look for the runs not created yet; return the late ones explained now (their
        creator logs its line just after the run's row is written, so a late start is
        looked up again until its line is there, for at most ``EXPLAIN_S``)."""
        for start in self.waiting():
            created = self.probe.created_at(start.run_id)
            if created is not None:
                start.created_at = created.timestamp()
                if (start.delay or 0.0) > LATE_S:
                    self._unexplained.append(start)
        explained = [start for start in self._unexplained if self._explain(start)]
        self._unexplained = [start for start in self._unexplained if start not in explained]
        return explained

    def _explain(self, start: Start, *, last: bool = False) -> bool:
        """Find who created ``start``'s run; True once found, or once it is too late to."""
        start.by, start.path = self._creator(start.run_id)
        waited = time.time() - (start.created_at or 0.0)
        return start.by != "?" or last or waited > EXPLAIN_S

    def _creator(self, run_id: str) -> tuple[str, str]:
        """The process whose log says it created ``run_id``, and by which path."""
        for log in sorted(self.logs.glob("serve-*.log")):
            for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
                if run_id not in line:
                    continue
                for said, path in PATHS.items():
                    if said in line:
                        return log.stem.removeprefix("serve-"), path
        return "?", "?"

    def settle(self) -> None:
        """Explain the late starts not explained yet, as far as the logs tell now (while
        they are there)."""
        for start in self._unexplained:
            self._explain(start, last=True)
        self._unexplained = []

    def summary(self) -> str:
        """The delays from ack to creation (median, max), and each late start explained."""
        delays = sorted(d for start in self.all if (d := start.delay) is not None)
        if not delays:
            return "promised runs: none created"
        head = (
            f"promised runs: {len(self.all)}; ack to run created: median "
            f"{statistics.median(delays):.2f} s, max {delays[-1]:.2f} s; "
            f"later than {LATE_S:g} s: {sum(d > LATE_S for d in delays)}"
        )
        late = [start.describe() for start in self.all if (start.delay or 0.0) > LATE_S]
        return "\n".join([head, *late, *(start.describe() for start in self.waiting())])
