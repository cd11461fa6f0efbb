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

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Job:
    """A function run every ``every``; overlapping runs are skipped, missed ones coalesced."""

    name: str
    fn: Callable[[], object]
    every: timedelta


def build_scheduler(jobs: list[Job]) -> BackgroundScheduler:
    """Return a (not yet started) scheduler running ``jobs``."""
    scheduler = BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(max(2, len(jobs)))},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        timezone="UTC",
    )
    for job in jobs:
        scheduler.add_job(_logged(job), "interval", seconds=job.every.total_seconds(),
                          id=job.name, name=job.name)
    return scheduler


def _logged(job: Job) -> Callable[[], None]:
    def run() -> None:
        try:
            job.fn()
        except Exception:  # a failed round is retried at the next interval
            logger.exception("scheduled job failed", extra={"action": job.name})

    return run
