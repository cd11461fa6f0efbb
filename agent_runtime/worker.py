"""A worker: claims runnable runs, executes them on threads, keeps their leases alive."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import timedelta

from agent_runtime.clock import Clock, SystemClock
from agent_runtime.exceptions import StoreUnavailable
from agent_runtime.executor import RunExecutor
from agent_runtime.ids import RunId
from agent_runtime.notices import Notifier
from agent_runtime.observers import StepObserver
from agent_runtime.records import Lease, Run, RunStatus
from agent_runtime.resume_first import ResumeFirst
from agent_runtime.store import Store
from agent_runtime.workflows import Workflows

logger = logging.getLogger(__name__)

SWEEP_JOIN_S = 5.0
"""How long a stopping worker waits for a sweep in progress; each change a sweep makes is a
transaction of its own, so one cut short at exit leaves nothing half done."""


def default_owner() -> str:
    """Return a worker name unique to this process: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions:
    """How a worker claims and holds runs."""

    concurrency: int = 4
    lease_ttl: timedelta = timedelta(seconds=3)
    poll_interval: timedelta = timedelta(seconds=1)
    owner: str = field(default_factory=default_owner)
    on_takeover: Callable[[RunId], object] | None = None
    """Told of each run this worker takes over from one whose lease lapsed (metrics count
    them)."""
    sweep_thread: bool = True
    """Sweep once per poll interval in a thread beside the claim loop; False where the
    process schedules the sweeps itself (with ``until_idle`` the claim loop sweeps anyway)."""
    on_claim: Callable[[float], object] | None = None
    """Told how long each claim took, in seconds, whether or not it found a run."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self.lease_ttl <= timedelta(0) or self.poll_interval <= timedelta(0):
            raise ValueError("lease_ttl and poll_interval must be positive")


class Worker:
    """Runs workflows until stopped (or, with ``until_idle``, until nothing is left to do)."""

    def __init__(
        self,
        store: Store,
        workflows: Workflows,
        *,
        options: WorkerOptions | None = None,
        clock: Clock | None = None,
        sweeps: Sequence[Callable[[], object]] = (),
        notifier: Notifier | None = None,
        observer: StepObserver | None = None,
    ) -> None:
        """``sweeps`` run once per poll interval (e.g. expiring overdue approvals), in a thread
        of their own beside the claim loop; ``observer`` hears of each entry committed and
        each run ended here."""
        self.options = options or WorkerOptions()
        self._sweeps = tuple(sweeps)
        self._store = store
        self._clock = clock or SystemClock()
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self.turns = ResumeFirst()
        """The runs resumed here getting to their first live step, which the later steps of
        the others (and the process's outbox deliveries) give way to."""
        self._executor = RunExecutor(
            store, workflows, self._clock, self._stopping, notifier, observer, self.turns
        )
        self._held: dict[RunId, Lease] = {}
        self._lock = threading.Lock()
        self.last_tick = time.monotonic()
        """``time.monotonic()`` when the claim loop last went round (a stuck loop stops it)."""

    def stop(self) -> None:
        """Ask the worker to stop: runs in flight finish their step and are released."""
        self._stopping.set()
        self.turns.open()
        self._wake.set()

    def wake(self) -> None:
        """Look for due runs now instead of at the next poll (say, after a decision)."""
        self._wake.set()

    def run(self, *, until_idle: bool = False) -> None:
        """Claim and execute runs until ``stop()`` or, with ``until_idle``, until idle.

        Sweeps run in a thread of their own (unless ``options.sweep_thread`` is False); with
        ``until_idle`` they run in the claim loop instead, so that what a sweep makes due (an
        expired approval's run) is run before the worker is idle.
        """
        done = threading.Event()
        heartbeat = threading.Thread(
            target=self._heartbeat, args=(done,), name="signoff-heartbeat", daemon=True
        )
        heartbeat.start()
        sweeper = threading.Thread(
            target=self._sweep_until, args=(done,), name="signoff-sweep", daemon=True
        )
        if self.options.sweep_thread and not until_idle:
            sweeper.start()
        with ThreadPoolExecutor(self.options.concurrency, thread_name_prefix="signoff-run") as pool:
            active: set[Future[RunStatus | None]] = set()
            while not self._stopping.is_set():
                self.last_tick = time.monotonic()
                try:
                    if self._round(pool, active, until_idle=until_idle):
                        break
                except Exception:  # a bug or a surprise must not end the loop silently
                    logger.exception("worker round failed", extra={"action": "worker"})
                    self._stopping.wait(self.options.poll_interval.total_seconds())
                active.difference_update({f for f in active if f.done()})
            wait(active)  # the heartbeat keeps their leases while they finish their step
        self._stopping.set()
        done.set()
        heartbeat.join()
        if sweeper.is_alive():
            sweeper.join(SWEEP_JOIN_S)

    def _round(
        self, pool: ThreadPoolExecutor, active: set[Future[RunStatus | None]], *, until_idle: bool
    ) -> bool:
        """Claim and start what is due, then pause; return True once idle is enough."""
        self._wake.clear()  # a wake-up from now on ends this round's pause
        if until_idle:
            self._sweep()
        claimed = self._claim(self.options.concurrency - len(active))
        for run, lease in claimed:
            future = pool.submit(self._serve, run, lease)
            future.add_done_callback(self._freed)
            active.add(future)
        if until_idle and not active and not claimed and self._idle():
            return True
        if not claimed:
            self._pause()
        return False

    def run_once(self) -> int:
        """Sweep, claim what is runnable now and execute it in this thread; return how many ran."""
        self._sweep()
        claimed = self._claim(self.options.concurrency)
        for run, lease in claimed:
            self._execute(run, lease)
        return len(claimed)

    def _sweep_until(self, done: threading.Event) -> None:
        """Sweep once per poll interval until ``done``: a long sweep never delays a claim."""
        while not done.is_set():
            try:
                self._sweep()
            except Exception:  # a bug or a surprise must not end the sweeps silently
                logger.exception("sweep failed", extra={"action": "sweep"})
            done.wait(self.options.poll_interval.total_seconds())

    def _sweep(self) -> None:
        for sweep in self._sweeps:
            try:
                sweep()
            except StoreUnavailable:
                logger.warning("sweep failed", extra={"action": "sweep"})

    def _idle(self) -> bool:
        """Nothing becomes due within one lease TTL (so a dead worker's run is taken over)."""
        next_due = self._store.next_due()
        return next_due is None or next_due > self._clock.now() + self.options.lease_ttl

    def _claim(self, free: int) -> list[tuple[Run, Lease]]:
        if free <= 0:
            return []
        now = self._clock.now()
        started = time.monotonic()
        try:
            claimed = self._store.claim_runs(
                self.options.owner, limit=free, now=now, expires_at=now + self.options.lease_ttl
            )
        except StoreUnavailable:
            logger.warning("claim failed", extra={"action": "claim"})
            return []
        if self.options.on_claim is not None:
            self.options.on_claim(time.monotonic() - started)
        with self._lock:
            self._held.update({lease.run_id: lease for _, lease in claimed})
        for _, lease in claimed:
            if lease.taken_over:
                self._took_over(lease.run_id)
        return claimed

    def _serve(self, run: Run, lease: Lease) -> RunStatus | None:
        """Execute ``run``, then claim and execute the next due run on this thread, and so on
        until none is due or the worker stops: the threads claim in parallel, the claim loop
        only fills threads that are free."""
        status = self._execute(run, lease)
        while not self._stopping.is_set():
            claimed = self._claim(1)
            if not claimed:
                break
            status = self._execute(*claimed[0])
        return status

    def _took_over(self, run_id: RunId) -> None:
        logger.warning(
            "run taken over from a worker whose lease lapsed",
            extra={"action": "takeover", "run_id": run_id},
        )
        if self.options.on_takeover is not None:
            self.options.on_takeover(run_id)

    def _execute(self, run: Run, lease: Lease) -> RunStatus | None:
        try:
            return self._executor.execute(run, lease)
        except Exception:  # its lease lapses and another worker takes the run over
            logger.exception("run execution failed", extra={"action": "execute", "run_id": run.id})
            return None
        finally:
            with self._lock:
                self._held.pop(run.id, None)

    def _freed(self, _: Future[RunStatus | None]) -> None:
        """A run's thread is free (its future done): claim the next run now."""
        self._wake.set()

    def _pause(self) -> None:
        """Wait for a wake-up (a notification, a finished run, ``stop()``) or the poll."""
        self._wake.wait(self.options.poll_interval.total_seconds())

    def _heartbeat(self, done: threading.Event) -> None:
        interval = self.options.lease_ttl.total_seconds() / 3
        while not done.wait(interval):
            try:
                self._renew_all()
            except Exception:  # leases must keep being renewed whatever one renewal did
                logger.exception("heartbeat failed", extra={"action": "heartbeat"})

    def _renew_all(self) -> None:
        with self._lock:
            leases = list(self._held.values())
        if not leases:
            return
        try:
            lost = self._store.renew_leases(leases, self._clock.now() + self.options.lease_ttl)
        except StoreUnavailable:
            logger.warning("heartbeat failed", extra={"action": "heartbeat"})
            return
        for lease in lost:
            logger.info("lease lost", extra={"action": "heartbeat", "run_id": lease.run_id})
