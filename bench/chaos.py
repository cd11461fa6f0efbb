"""Chaos: the demo task again and again on PostgreSQL while processes, the database and Slack
fail, then a table of what survived.

``python -m bench.chaos`` (``--short``: the form the test suite runs) starts a PostgreSQL
cluster of its own (``tests/integration/private_postgres``: it is restarted on purpose), the
demo payment provider and the local fake Slack Web API (``SlackWorld``), two ``signoff serve``
and two ``signoff worker`` processes with kill points (``bench.kill_points``). It types
``/agent refund order 1042 and email the customer`` into a serve process, signed as Slack
signs it, and clicks Approve on each approval card that reaches Slack, run after run, one run
at a time. While a run goes on, faults are injected:

- SIGKILL at a random kill point (``bench.chaos_points``): a store call, a tool execution, a
  journal commit, a Slack delivery, a decision's commit, any other commit. Every process is
  armed; the first to reach the point dies and is started again at once;
- once in ten runs each: every database connection terminated (``pg_terminate_backend``);
  the database stopped at once and started again; Slack unreachable (the fake's socket
  closed), then answering 429 with ``Retry-After`` for a while.

A click whose card stays pending is clicked again (the first may have died with its serve).
At the end it counts: runs completed; refunds or emails charged twice; approvals decided
twice; Slack messages lost (undelivered notices, runs without a root message) or posted
twice; and, per fault class, the time to recovery: from a kill, the termination or the
database's restart to the next progress (a journal entry, a delivered message or a decision),
and from Slack's return (or the end of its 429s) until every notice is delivered; and, for
each run an ack promised, the delay from the ack to the run's row, a late one with who created
it and how (``bench.chaos_starts``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import requests

from bench.chaos_fleet import Death, Fleet
from bench.chaos_points import (
    FAULT_CLASSES,
    PG_RESTART,
    SLACK_429,
    SLACK_DOWN,
    TERMINATE,
    Aim,
    class_of,
    pick,
)
from bench.chaos_starts import Starts
from bench.chaos_tally import Probe, Tally, card_in_slack, tally
from bot.slack.blocks import APPROVE
from store import build_engine, upgrade
from tests.integration.private_postgres import PrivatePostgres, server_binaries
from tests.integration.serve_cluster import Cluster
from tests.integration.slack_harness import APPROVER, TASK, SlackWorld
from tests.integration.slack_readers import run_id_of

T = TypeVar("T")

LEASE_TTL_S = 1.0
POLL_INTERVAL_S = 0.1
TICK_S = 0.02
RECLICK_S = 3.0
"""A card still pending this long after its click is clicked again."""
RUN_TIMEOUT_S = 240.0
DATABASE_LOST = (
    "signoff: error: the database at ",
    "signoff: error: connection failed",
    "signoff: error: consuming input failed: server closed the connection unexpectedly",
    "signoff: error: terminating connection due to administrator command",
)
"""What ``signoff`` says when it exits at start because it cannot reach the database: it
gave up after ``SIGNOFF_STARTUP_DB_WAIT_SECONDS`` of trying (a restart shorter than that
is waited out, so it is rarely seen here), or its connection was cut (a restart,
``pg_terminate_backend``) after it had opened the database, while it was starting."""
START_GRACE_S = 2.0
"""A process that exits this soon after the database's restart started while it was down."""


@dataclass(frozen=True)
class Options:
    """How much chaos: runs, kills, processes and fault durations."""

    runs: int
    kills: int
    workers: int
    kills_per_run: tuple[int, int]
    slack_down_s: float
    slack_429_s: float
    retry_after_s: int
    pg_down_s: float
    armed_for_s: float = 4.0
    """A point not reached this long after it was armed is replaced by another."""
    outbox_claim_s: float = 60.0
    """How long a dispatcher holds a notice it sends: a notice whose sender died waits this
    long for another (60 s is the default setting)."""
    seed: int = 14


FULL = Options(
    runs=30,
    kills=200,
    workers=2,
    kills_per_run=(5, 9),
    slack_down_s=60.0,
    slack_429_s=10.0,
    retry_after_s=2,
    pg_down_s=5.0,
    outbox_claim_s=10.0,
)
SHORT = Options(
    runs=3,
    kills=6,
    workers=0,
    kills_per_run=(2, 3),
    slack_down_s=2.0,
    slack_429_s=1.0,
    retry_after_s=1,
    pg_down_s=1.0,
    armed_for_s=2.5,
    outbox_claim_s=4.0,
)


@dataclass(frozen=True)
class Recovery:
    """How long one fault took to recover from, and, for a kill, its point and the process
    it killed (empty for any other fault: its class says it)."""

    seconds: float
    fault: str


@dataclass
class Report:
    """Everything one chaos session counted."""

    options: Options
    tally: Tally
    kills: int
    unplanned: int
    refused_to_start: int
    recoveries: dict[str, list[Recovery]]
    seconds: float
    starts: Starts


class Chaos:
    """Drives runs through the fleet and injects faults (see the module doc)."""

    def __init__(self, options: Options, pg: PrivatePostgres, world: SlackWorld) -> None:
        self.options = options
        self.pg = pg
        self.world = world
        self.rng = random.Random(options.seed)
        self.cluster = Cluster(world, pg.url)
        env = dict(self.cluster.env)
        env["SIGNOFF_LEASE_TTL_SECONDS"] = str(LEASE_TTL_S)
        env["SIGNOFF_POLL_INTERVAL_SECONDS"] = str(POLL_INTERVAL_S)
        env["SIGNOFF_OUTBOX_CLAIM_SECONDS"] = str(options.outbox_claim_s)
        self.fleet = Fleet(world, self.cluster.reader, env, world.tmp_path, options.workers)
        self.probe = Probe(pg.url)
        self.starts = Starts(self.probe, world.tmp_path)
        self.runs: list[str] = []
        self.kills = 0
        self.recoveries: dict[str, list[Recovery]] = defaultdict(list)
        self._open: list[tuple[str, str, float, int]] = []
        """Faults not recovered yet: class, what, since when, progress at that moment."""
        self._armed: Aim | None = None
        self._armed_at = 0.0
        self._clicked: dict[str, float] = {}
        self._run_kills = 0
        self.unplanned = 0
        self.refused_to_start = 0
        self._database_down: tuple[float, float] | None = None
        """When the database was last stopped, and started again."""
        self._stopped: list[tuple[str, str, float]] | None = None
        """While the database is stopped, the kills seen meanwhile (class, when): their
        recovery is measured once it is back (the progress it starts from is read there)."""
        self._aims = 0

    # -- the session -----------------------------------------------------------------------

    def session(self) -> Report:
        """Run the runs (more if the kills are not spent), then count."""
        began = time.monotonic()
        try:
            index = 0
            while index < self.options.runs or self.kills < self.options.kills:
                started = time.monotonic()
                self._one_run(index)
                print(
                    f"chaos: run {index} done in {time.monotonic() - started:.1f} s, "
                    f"{self.kills} kills so far ({time.monotonic() - began:.0f} s)",
                    file=sys.stderr,
                )
                index += 1
            self.fleet.disarm()
            self._wait(lambda: self.probe.undelivered() == 0, what="every notice delivered")
            counted = tally(self.world, self.probe, self.runs)
            self.starts.settle()
        finally:
            self.close()
        return Report(
            self.options,
            counted,
            self.kills,
            self.unplanned,
            self.refused_to_start,
            dict(self.recoveries),
            time.monotonic() - began,
            self.starts,
        )

    def _one_run(self, index: int) -> None:
        run_id = self._start_run()
        self.runs.append(run_id)
        self._run_kills = self.rng.randint(*self.options.kills_per_run)
        special = {2: self._terminate, 5: self._restart_database, 8: self._slack_outage}
        fault = special.get(index % 10) if self.options.runs >= 10 else self._short_fault(index)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        injected = fault is None
        while (status := self.probe.status(run_id)) != "completed":
            assert time.monotonic() < deadline, self._stuck(run_id)
            assert status not in ("failed", "cancelled"), self._stuck(run_id)
            self._tick(run_id)
            if not injected and fault is not None and (self.probe.journal(run_id) or 0) >= 3:
                self.fleet.disarm()
                self._armed = None
                fault()
                injected = True
        self._settle_recoveries()

    def _short_fault(self, index: int) -> Callable[[], None] | None:
        """In the short form, one of each non-kill fault in runs 0, 1 and 2."""
        return {0: self._terminate, 1: self._restart_database, 2: self._slack_outage}.get(index)

    def _tick(self, run_id: str) -> None:
        for death in self.fleet.deaths():
            self._died(death)
        for start in self.starts.check():
            print(f"chaos: {start.describe()}", file=sys.stderr)
        self._note_progress()
        self._click_pending(run_id)
        self._maybe_arm()
        time.sleep(TICK_S)

    # -- kills -----------------------------------------------------------------------------

    def _maybe_arm(self) -> None:
        now = time.monotonic()
        if self._armed is not None and now - self._armed_at < self.options.armed_for_s:
            return
        if self._run_kills <= 0:
            if self._armed is not None:
                self.fleet.disarm()
                self._armed = None
            return
        self._armed = pick(self.rng, self._aims)
        self._aims += 1
        self._armed_at = now
        self.fleet.arm(self._armed.point, self._armed.hit)

    def _died(self, death: Death) -> None:
        self.fleet.disarm()
        self.starts.died(death)
        self._armed = None
        if death.point is None and self._database_was_down(death):
            self.refused_to_start += 1
            return
        if death.point is None:
            self.unplanned += 1
            print(f"chaos: {death.name} died unplanned:\n{death.log}", file=sys.stderr)
            return
        self.kills += 1
        self._run_kills -= 1
        what = f"{death.point} in {death.name}"
        if self._stopped is not None:
            self._stopped.append((class_of(death.point), what, death.seen_at))
            return
        self._fault(class_of(death.point), death.seen_at, what)

    # -- faults other than kills -----------------------------------------------------------

    def _terminate(self) -> None:
        self.probe.terminate_all()
        self._fault(TERMINATE, time.monotonic(), "")

    def _restart_database(self) -> None:
        stopped = time.monotonic()
        self._database_down = (stopped, stopped + 3600.0)
        self._stopped = []
        self.pg.stop()
        self._pause(self.options.pg_down_s)
        self.pg.start()
        self._database_down = (stopped, time.monotonic())
        killed, self._stopped = self._stopped, None
        for fault_class, what, since in killed:
            self._fault(fault_class, since, f"{what}, the database down")
        self._fault(PG_RESTART, time.monotonic(), "")

    def _database_was_down(self, death: Death) -> bool:
        """A process that exited with an error (no signal) because of the database: it said
        it could not connect or that its connection was cut while it started, or it exited
        while the database was down or just after (a process restarted then cannot connect)."""
        if death.code is None or death.code <= 0:
            return False
        if any(message in death.log for message in DATABASE_LOST):
            return True
        if self._database_down is None:
            return False
        stopped, started = self._database_down
        return stopped <= death.seen_at <= started + START_GRACE_S

    def _slack_outage(self) -> None:
        """Slack unreachable, then back but answering 429 for a while: its recovery runs
        from its return to the backlog's delivery; the 429s' from their end to it."""
        options = self.options
        self.world.slack.go_offline()
        self._pause(options.slack_down_s)
        self.world.workspace.rate_limit_for(options.slack_429_s, retry_after=options.retry_after_s)
        self.world.slack.go_online()
        back = time.monotonic()
        self._wait(lambda: self.probe.undelivered() == 0, what="Slack's backlog delivered")
        done = time.monotonic()
        self.recoveries[SLACK_DOWN].append(Recovery(done - back, ""))
        rate_limited = max(0.0, done - back - options.slack_429_s)
        self.recoveries[SLACK_429].append(Recovery(rate_limited, ""))

    def _pause(self, seconds: float) -> None:
        """Keep the session going (clicks, restarts) for ``seconds`` of a fault."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            for death in self.fleet.deaths():
                self._died(death)
            time.sleep(TICK_S)

    # -- recovery --------------------------------------------------------------------------

    def _fault(self, fault_class: str, since: float, what: str) -> None:
        progress = self._wait(self.probe.progress, what="the database", allow_zero=True)
        self._open.append((fault_class, what, since, progress))

    def _note_progress(self) -> None:
        now_progress = self.probe.progress()
        if now_progress is None:
            return
        now, still = time.monotonic(), []
        for fault_class, what, since, progress in self._open:
            if now_progress > progress:
                self.recoveries[fault_class].append(Recovery(now - since, what))
            else:
                still.append((fault_class, what, since, progress))
        self._open = still

    def _settle_recoveries(self) -> None:
        """A fault with no progress after it before the run completed: the run had none to
        make; it counts as recovered when the run completed."""
        now = time.monotonic()
        for fault_class, what, since, _ in self._open:
            self.recoveries[fault_class].append(Recovery(now - since, f"{what} (at the run's end)"))
        self._open = []

    # -- Slack, as a person uses it ----------------------------------------------------------

    def _start_run(self) -> str:
        def typed() -> str | None:
            self._tick_deaths()
            for front in self.fleet.fronts():
                try:  # the run is waited for with the session's patience, as every fault is
                    ack = front.post(front.command_body(TASK), settle=False)
                except requests.RequestException:
                    continue
                if ack.status == 200 and "Started run" in ack.text:
                    self.starts.acked(str(run_id_of(ack)), front.name)
                    return str(run_id_of(ack))
            return None

        return self._wait(typed, what="a serve process to start a run")

    def _tick_deaths(self) -> None:
        for death in self.fleet.deaths():
            self._died(death)

    def _click_pending(self, run_id: str) -> None:
        now = time.monotonic()
        for approval_id in self.probe.pending_approvals(run_id) or []:
            if now - self._clicked.get(approval_id, -RECLICK_S) < RECLICK_S:
                continue
            card = card_in_slack(self.world, approval_id)
            fronts = self.fleet.fronts()
            if card is None or not fronts:
                continue
            self._clicked[approval_id] = now
            try:
                self.rng.choice(fronts).click(APPROVER, APPROVE, card)
            except requests.RequestException:
                self._clicked.pop(approval_id)

    # -- plumbing --------------------------------------------------------------------------

    def _wait(self, probe: Callable[[], T | None], *, what: str, allow_zero: bool = False) -> T:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while True:
            value = probe()
            if value or (allow_zero and value is not None):
                return value
            assert time.monotonic() < deadline, f"timed out waiting for {what}\n{self.fleet.logs()}"
            self._tick_deaths()
            time.sleep(TICK_S)

    def _stuck(self, run_id: str) -> str:
        status = self.probe.status(run_id)
        self.starts.settle()
        return f"run {run_id} is {status}\n{self.starts.summary()}\n{self.fleet.logs()}"

    def close(self) -> None:
        """Kill the fleet and close the connections."""
        try:
            self.fleet.close()
        finally:
            self.probe.close()
            self.cluster.reader.store.engine.dispose()


# -- the table ---------------------------------------------------------------------------------


def table(report: Report) -> str:
    """The chaos table, as Markdown."""
    t = report.tally
    lines = [
        "| what | count |",
        "|---|---|",
        f"| runs completed | {t.completed} / {t.started} |",
        f"| random SIGKILLs | {report.kills} |",
        f"| processes that died otherwise | {report.unplanned} |",
        f"| processes that exited at start, database down or cut (restarted) | "
        f"{report.refused_to_start} |",
        f"| duplicate charges | {t.duplicate_charges} |",
        f"| duplicate emails | {t.duplicate_emails} |",
        f"| decisions taken twice | {t.decided_twice} |",
        f"| Slack messages lost | {t.messages_lost} |",
        f"| Slack messages doubled | {t.messages_doubled} |",
        "",
        "| fault class | faults | recovery median (s) | p90 (s) | max (s) | slowest |",
        "|---|---|---|---|---|---|",
    ]
    for fault_class in FAULT_CLASSES:
        recoveries = sorted(report.recoveries.get(fault_class, []), key=lambda r: r.seconds)
        if not recoveries:
            lines.append(f"| {fault_class} | 0 | - | - | - | |")
            continue
        times = [r.seconds for r in recoveries]
        p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
        lines.append(
            f"| {fault_class} | {len(times)} | {statistics.median(times):.2f} "
            f"| {p90:.2f} | {times[-1]:.2f} | {recoveries[-1].fault} |"
        )
    lines += ["", report.starts.summary(), ""]
    o = report.options
    lines.append(
        f"{report.seconds:.0f} s in all; lease {LEASE_TTL_S:g} s, outbox claim "
        f"{o.outbox_claim_s:g} s, Slack down {o.slack_down_s:g} s then 429 for "
        f"{o.slack_429_s:g} s, database down {o.pg_down_s:g} s."
    )
    return "\n".join(lines)


def chaos(options: Options) -> Report:
    """One chaos session on a PostgreSQL cluster of its own; return its report."""
    binaries = server_binaries()
    if binaries is None:
        raise SystemExit("chaos: no PostgreSQL server binaries under /usr/lib/postgresql")
    with (
        tempfile.TemporaryDirectory(prefix="signoff-chaos-") as folder,
        PrivatePostgres(binaries) as pg,
    ):
        engine = build_engine(pg.url)
        try:
            upgrade(engine)
        finally:
            engine.dispose()
        with SlackWorld(Path(folder), pg.url, approvers=(APPROVER,)) as world:
            return Chaos(options, pg, world).session()


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run one session, print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__)
    parser.add_argument("--short", action="store_true", help="the short form the tests run")
    parser.add_argument("--runs", type=int, help="at least this many runs")
    parser.add_argument("--kills", type=int, help="at least this many random SIGKILLs")
    parser.add_argument("--seed", type=int, help="the random seed")
    parser.add_argument(
        "--outbox-claim",
        type=float,
        help="SIGNOFF_OUTBOX_CLAIM_SECONDS of the processes (a delivery cut short by a kill "
        "is retried once its claim expires)",
    )
    args = parser.parse_args(argv)
    options = SHORT if args.short else FULL
    options = replace(
        options,
        runs=args.runs or options.runs,
        kills=args.kills if args.kills is not None else options.kills,
        seed=args.seed if args.seed is not None else options.seed,
        outbox_claim_s=args.outbox_claim or options.outbox_claim_s,
    )
    print(table(chaos(options)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
