"""What keeps a long-running process (``signoff serve``, ``signoff worker``) honest: its
loops watched, its metrics, its health endpoints, its watchdog and its drain deadline."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from agent_runtime import SystemClock
from bot.app.assembly import check_tools
from bot.app.request_hygiene import WSGIApp
from bot.app.settings import Settings
from bot.app.wiring import Services, build_services
from bot.ops.health import Health
from bot.ops.http import Front, Ops, ops_app
from bot.ops.loops import Loops
from bot.ops.metrics import Metrics, MetricsObserver
from bot.ops.startup import Startup, when_reachable
from bot.ops.watchdog import Watchdog

logger = logging.getLogger(__name__)

EXIT_DRAIN_TIMEOUT = 4
"""The exit status of a process that did not finish draining within ``SIGNOFF_DRAIN_SECONDS``."""


@dataclass(frozen=True, slots=True)
class Supervision:
    """The loops, metrics and endpoints of one process, and the watchdog over its loops."""

    loops: Loops
    metrics: Metrics
    ops: Ops
    watchdog: Watchdog


@dataclass(frozen=True, slots=True)
class Starting:
    """What a process has before it reaches its database: the progress of its start, its
    metrics, and the ``Front`` its listener serves (the operator's endpoints reporting on
    ``startup``, anything else to the fallback given)."""

    startup: Startup
    metrics: Metrics
    front: Front

    def up(self, application: WSGIApp) -> None:
        """The process is up: ``application`` answers from now on."""
        self.front.up(application)
        self.startup.finished()


def starting(fallback: WSGIApp | None = None) -> Starting:
    """Begin a process's start: probes and metrics answer from now on, once listened to."""
    startup, metrics = Startup(), Metrics()
    metrics.watch_startup(startup)
    return Starting(startup, metrics, Front(ops_app(Ops(startup, metrics), fallback)))


def supervised_services(
    settings: Settings, start: Starting | None = None
) -> tuple[Services, Supervision]:
    """Build the services of a long-running process with its metrics and health wired in,
    waiting up to ``SIGNOFF_STARTUP_DB_WAIT_SECONDS`` for the database to answer (and
    reporting how it goes to ``start``, whose metrics it goes on with)."""
    start = start or starting()
    metrics = start.metrics
    services = when_reachable(
        lambda: build_services(settings, stream_traces=True, observer=MetricsObserver(metrics)),
        url=settings.database_url,
        wait=settings.startup_db_wait,
        startup=start.startup,
    )
    check_tools(services.agents)
    services.stores.check_pooling()
    stores, clock, loops = services.stores, SystemClock(), Loops()
    metrics.watch(lambda: stores.stats(clock.now()), loops, clock)
    health = Health(loops, stores.schema_is_current, settings.loop_stall, settings.loop_exit)
    return services, Supervision(
        loops, metrics, Ops(health, metrics), Watchdog(loops, settings.loop_exit)
    )


def drain_deadline(timeout: timedelta, exit: Callable[[int], object] = os._exit) -> threading.Timer:
    """Start a timer that ends the process if draining is not over within ``timeout``."""

    def expire() -> None:
        logger.error("draining took too long; exiting", extra={"action": "drain"})
        for handler in logging.getLogger().handlers:
            handler.flush()
        exit(EXIT_DRAIN_TIMEOUT)

    timer = threading.Timer(timeout.total_seconds(), expire)
    timer.daemon = True
    timer.start()
    return timer
