"""Periodic jobs on APScheduler's BackgroundScheduler, with no job store of its own.

Every job is a claim in the database (approvals sweep, outbox dispatch, waking the worker),
so running the same jobs on N instances never acts twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from agent_runtime import StoreUnavailable
from bot.ops.loops import Loops

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Job:
    """A function run every ``every``; overlapping runs are skipped, missed ones coalesced."""

    name: str
    fn: Callable[[], object]
    every: timedelta


def build_scheduler(jobs: list[Job], loops: Loops | None = None) -> BackgroundScheduler:
    """Return a (not yet started) scheduler running ``jobs``; each job is a loop in ``loops``
    that ticks whenever a round ends, failed or not."""
    scheduler = BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(max(2, len(jobs)))},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        timezone="UTC",
    )
    for job in jobs:
        if loops is not None:
            loops.add(job.name, job.every)
        scheduler.add_job(
            _logged(job, loops),
            "interval",
            seconds=job.every.total_seconds(),
            id=job.name,
            name=job.name,
        )
    return scheduler


REPEAT_LOGGED_EVERY_S = 300.0
"""While a job keeps failing the same way, how often it says so again."""


def _logged(job: Job, loops: Loops | None) -> Callable[[], None]:
    failing = Failing(job.name)

    def run() -> None:
        try:
            job.fn()
        except Exception as exc:  # a failed round is retried at the next interval
            failing.failed(exc)
        else:
            failing.succeeded()
        if loops is not None:
            loops.tick(job.name)

    return run


class Failing:
    """How a job's failures are logged: the first of a run of failures the same way in
    full (a database outage as one warning, without a traceback), then once every
    ``REPEAT_LOGGED_EVERY_S`` with their count, and the recovery once. A job that runs every
    300 ms logged every failure of an outage with its traceback: 8 a second per process."""

    def __init__(self, job: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._job = job
        self._clock = clock
        self._kind: tuple[str, str] | None = None
        self._count = 0
        self._told_at = 0.0

    def failed(self, exc: Exception) -> None:
        """Log a failed round, unless it fails as the last one did and was told lately."""
        kind = (type(exc).__name__, str(exc))
        now = self._clock()
        self._count = self._count + 1 if kind == self._kind else 1
        extra = {"action": self._job}
        if kind != self._kind:
            self._kind, self._told_at = kind, now
            if isinstance(exc, StoreUnavailable):
                logger.warning("scheduled job paused: %s", exc, extra=extra)
            else:
                logger.exception("scheduled job failed", extra=extra)
        elif now - self._told_at >= REPEAT_LOGGED_EVERY_S:
            self._told_at = now
            logger.warning(
                "scheduled job still failing (%d times): %s", self._count, exc, extra=extra
            )

    def succeeded(self) -> None:
        """A round went through: if failures came before, say the job is back."""
        if self._kind is not None:
            logger.info(
                "scheduled job back after %d failures", self._count, extra={"action": self._job}
            )
            self._kind, self._count = None, 0
