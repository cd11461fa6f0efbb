"""Prometheus metrics of one process, on a registry of its own.

What the database knows (runs by status, pending approvals, decisions, the outbox) is read
at scrape time by ``StoreCollector``; what only this process sees (steps it committed,
model tokens it spent, Slack's refusals of its calls) is counted as it happens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from slack_sdk.errors import SlackApiError

from agent_runtime import Clock
from agent_runtime.exceptions import StoreUnavailable
from agent_runtime.records import Run, StepRecord
from agent_runtime.step_names import MODEL
from bot.ops.loops import Loops
from bot.ops.startup import Startup
from bot.slack.delivery_errors import is_rate_limited, slack_error
from store import Stats

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STEP_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 30.0, 120.0, 600.0)
RUN_STATUSES = ("pending", "running", "waiting", "completed", "failed", "cancelled")
OUTBOX_STATUSES = ("pending", "dead")


class Metrics:
    """The registry of this process and the counters fed from inside it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.slack_errors = Counter(
            "signoff_slack_api_errors",
            "Slack Web API calls refused",
            ["method", "error"],
            registry=r,
        )
        self.slack_rate_limited = Counter(
            "signoff_slack_rate_limited",
            "Slack Web API calls answered with a 429",
            ["method"],
            registry=r,
        )
        self.steps = Counter(
            "signoff_steps_committed",
            "Journal entries this process committed",
            ["kind"],
            registry=r,
        )
        self.step_seconds = Histogram(
            "signoff_step_duration_seconds",
            "How long each committed step took",
            ["kind"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "signoff_model_tokens", "Model tokens used by runs here", ["direction"], registry=r
        )
        self.cost = Counter(
            "signoff_model_cost_usd", "Model cost of runs that ended here, USD", registry=r
        )
        self.claim_seconds = Histogram(
            "signoff_claim_duration_seconds",
            "How long a worker's claim of due runs took",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )
        self.lease_takeovers = Counter(
            "signoff_lease_takeovers",
            "Runs this process took over from a worker whose lease had lapsed",
            registry=r,
        )

    def watch(self, read: Callable[[], Stats], loops: Loops, clock: Clock) -> None:
        """Also expose what ``read`` counts in the database and when each loop last ticked."""
        self.registry.register(StoreCollector(read, loops, clock))

    def watch_startup(self, startup: Startup) -> None:
        """Also expose whether the process is still starting and how often it failed to
        reach its database meanwhile."""
        self.registry.register(StartupCollector(startup))

    def slack_refused(self, method: str, exc: SlackApiError) -> None:
        """Count one Slack call refused (and, for a 429, rate limited)."""
        status = exc.response.status_code if exc.response is not None else 0
        self.slack_errors.labels(method, slack_error(exc) or f"http_{status}").inc()
        if is_rate_limited(exc):
            self.slack_rate_limited.labels(method).inc()

    def claimed(self, seconds: float) -> None:
        """Time one claim of due runs."""
        self.claim_seconds.observe(seconds)

    def took_over(self, run_id: str) -> None:
        """Count one run taken over from a lapsed lease."""
        self.lease_takeovers.inc()

    def exposition(self) -> bytes:
        """Return the metrics in Prometheus's text format."""
        return generate_latest(self.registry)


class MetricsObserver:
    """A step observer counting steps, their duration, model tokens and cost."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def step_committed(self, run: Run, step: StepRecord) -> None:
        """Count the entry, its duration, and the tokens of a model call."""
        kind = str(step.kind)
        self._metrics.steps.labels(kind).inc()
        seconds = (step.finished_at - step.started_at).total_seconds()
        self._metrics.step_seconds.labels(kind).observe(max(0.0, seconds))
        usage = step.output.get("usage") if isinstance(step.output, dict) else None
        if step.name == MODEL and isinstance(usage, dict):
            for direction in ("input", "output"):
                self._metrics.tokens.labels(direction).inc(
                    max(0, int(usage.get(f"{direction}_tokens") or 0))
                )

    def run_ended(self, run: Run) -> None:
        """Add the run's model cost, if it reports one."""
        usage = run.output.get("usage") if isinstance(run.output, dict) else None
        cost = usage.get("cost_usd") if isinstance(usage, dict) else None
        if isinstance(cost, int | float) and cost > 0:
            self._metrics.cost.inc(cost)


class StoreCollector(Collector):
    """Reads the database's counts at each scrape (a few aggregate queries)."""

    def __init__(self, read: Callable[[], Stats], loops: Loops, clock: Clock) -> None:
        self._read = read
        self._loops = loops
        self._clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Yield the families; with the database down, only ``signoff_database_up 0``."""
        yield self._loop_ticks()
        up = GaugeMetricFamily("signoff_database_up", "Whether the last scrape read the database")
        try:
            stats = self._read()
        except StoreUnavailable:
            logger.warning("metrics could not read the database", extra={"action": "metrics"})
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families(stats, self._clock.now())

    def _loop_ticks(self) -> GaugeMetricFamily:
        ticks = GaugeMetricFamily(
            "signoff_loop_last_tick_timestamp_seconds",
            "When each background loop last went round",
            labels=["loop"],
        )
        for name, at in sorted(self._loops.last_ticks().items()):
            ticks.add_metric([name], at)
        return ticks


class StartupCollector(Collector):
    """Reads the progress of the process's start at each scrape."""

    def __init__(self, startup: Startup) -> None:
        self._startup = startup

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Yield ``signoff_starting`` and ``signoff_startup_database_failures_total``."""
        yield GaugeMetricFamily(
            "signoff_starting",
            "1 while the process is still reaching its database at start, then 0",
            value=0 if self._startup.up else 1,
        )
        yield CounterMetricFamily(
            "signoff_startup_database_failures",
            "Attempts to reach the database at start that failed",
            value=self._startup.failures,
        )


def families(stats: Stats, now: datetime) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """Turn the database's counts into metric families."""
    yield _by("signoff_runs", "Runs by status", "status", stats.runs, RUN_STATUSES)
    yield _gauge(
        "signoff_approvals_pending", "Approvals waiting for a decision", stats.approvals_pending
    )
    yield _gauge(
        "signoff_approvals_oldest_pending_age_seconds",
        "Age of the oldest pending approval",
        _age(stats.oldest_pending_approval, now),
    )
    decisions = CounterMetricFamily(
        "signoff_approval_decisions",
        "Approvals decided by outcome, decisions refused by reason",
        labels=["outcome"],
    )
    for outcome, count in stats.decisions.items():
        decisions.add_metric([outcome], count)
    yield decisions
    yield _by(
        "signoff_outbox_notices",
        "Slack notices not delivered: pending, or dead (given up)",
        "status",
        stats.outbox,
        OUTBOX_STATUSES,
    )
    yield _gauge(
        "signoff_outbox_delivery_lag_seconds",
        "Age of the oldest notice not yet delivered",
        _age(stats.oldest_undelivered, now),
    )
    yield _gauge(
        "signoff_runs_lease_expired",
        "Running runs whose lease lapsed (to be taken over)",
        stats.expired_leases,
    )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _by(
    name: str, documentation: str, label: str, counts: dict[str, int], known: tuple[str, ...]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for value in sorted(set(known) | set(counts)):
        family.add_metric([value], counts.get(value, 0))
    return family


def _age(since: datetime | None, now: datetime) -> float:
    return 0.0 if since is None else max(0.0, (now - since).total_seconds())
