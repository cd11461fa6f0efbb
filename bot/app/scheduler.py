"""Periodic jobs on APScheduler's BackgroundScheduler, with no job store of its own.

Every job is a claim in the database (approvals sweep, outbox dispatch, waking the worker),
so running the same jobs on N instances never acts twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

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


def _logged(job: Job, loops: Loops | None) -> Callable[[], None]:
    def run() -> None:
        try:
            job.fn()
        except Exception:  # a failed round is retried at the next interval
            logger.exception("scheduled job failed", extra={"action": job.name})
        if loops is not None:
            loops.tick(job.name)

    return run
