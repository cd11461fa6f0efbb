"""Every periodic job, registered here once, by what a process does.

A process does some of three things, and each brings its jobs:

    serving Slack      dispatch      outbox messages to Slack
                       intake        start acknowledged commands whose listener died
                       audit-anchor  the audit chains' heads to SIGNOFF_AUDIT_ANCHOR_FILE, if set
    executing runs     approvals     deadlines, reminders and escalation of approvals
    sending webhooks   webhooks      the approvals API's due webhooks

Which process does what:

    signoff serve                  serving Slack, executing runs, sending webhooks
    signoff serve --no-scheduler   none (its worker, if any, claims runs only)
    signoff worker                 executing runs, sending webhooks
    signoff worker --until-idle    sending webhooks (its claim loop sweeps approvals itself,
                                   so that what a sweep makes due runs before it is idle)
    signoff dev                    serving Slack (its ``signoff worker`` child does the rest)

No job wakes the worker or recovers leases: a worker's claim loop polls every
``SIGNOFF_POLL_INTERVAL_SECONDS`` (woken sooner by notifications), and a run whose lease
lapsed is claimable like any due run. Every job is a claim in the database, so the same jobs
on N processes never act twice.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import timedelta

from slack_sdk import WebClient

from agent_runtime import SystemClock
from agent_runtime.worker import default_owner
from bot.api.webhook_sender import webhook_sender
from bot.app.anchor_file import anchor_if_changed
from bot.app.scheduler import Job
from bot.app.settings import SettingsError
from bot.app.slack_mode import web_client, workspace_clients
from bot.app.wiring import Services
from bot.ops.metrics import Metrics
from bot.slack.ack_gate import AckGate
from bot.slack.channel_refusals import ChannelRefusals
from bot.slack.dispatcher import Dispatcher, DispatchOptions, Pace
from bot.slack.intake import IntakeSweep

DISPATCH_EVERY = timedelta(milliseconds=300)
INTAKE_EVERY = timedelta(seconds=2)
SEND_EVERY = timedelta(milliseconds=300)


class Duty(enum.Enum):
    """A thing a process does that brings periodic jobs."""

    SLACK = "serving Slack"
    RUNS = "executing runs"
    WEBHOOKS = "sending webhooks"


SERVE = frozenset(Duty)
WORKER = frozenset({Duty.RUNS, Duty.WEBHOOKS})
WORKER_UNTIL_IDLE = frozenset({Duty.WEBHOOKS})
DEV = frozenset({Duty.SLACK})


def jobs(
    services: Services,
    duties: frozenset[Duty],
    metrics: Metrics | None = None,
    give_way: Callable[[], object] | None = None,
    *,
    acks: AckGate | None = None,
) -> list[Job]:
    """The jobs of a process doing ``duties`` (Slack's refusals counted in ``metrics``); its
    outbox deliveries call ``give_way`` first (see ``DispatchOptions.give_way``), and each
    outbox round waits its turn at ``acks``, if given, while Slack's requests are answered."""
    found: list[Job] = []
    if Duty.SLACK in duties:
        found += _slack_jobs(services, metrics, give_way, acks)
    if Duty.RUNS in duties:
        found.append(Job("approvals", services.approvals.sweep, services.settings.poll_interval))
    if Duty.WEBHOOKS in duties:
        found.append(Job("webhooks", webhook_sender(services).send_once, SEND_EVERY))
    return found


def _slack_jobs(
    services: Services,
    metrics: Metrics | None,
    give_way: Callable[[], object] | None,
    acks: AckGate | None,
) -> list[Job]:
    # one batch a round, so that a long backlog still shows the loop going round
    dispatch = dispatcher(services, web_client(services.settings), metrics, give_way).dispatch_once
    return [
        Job("dispatch", dispatch if acks is None else _in_turn(acks, dispatch), DISPATCH_EVERY),
        Job("intake", intake_sweep(services).sweep_once, INTAKE_EVERY),
        *_anchor_job(services),
    ]


def _in_turn(acks: AckGate, work: Callable[[], int]) -> Callable[[], int]:
    """``work``, started once its turn comes at ``acks`` (before it claims anything)."""

    def in_turn() -> int:
        acks.wait_turn()
        return work()

    return in_turn


def dispatcher(
    services: Services,
    client: WebClient,
    metrics: Metrics | None = None,
    give_way: Callable[[], object] | None = None,
) -> Dispatcher:
    """The outbox dispatcher of this process (counting Slack's refusals in ``metrics``;
    calling ``give_way`` before each notice)."""
    settings = services.settings
    options = DispatchOptions(
        claim_for=settings.outbox_claim,
        backoff_cap=settings.outbox_backoff_cap,
        pace=Pace(every=settings.slack_post_interval, burst=settings.slack_post_burst),
        on_refused=None if metrics is None else metrics.slack_refused,
        thread_status=settings.assistant_status,
        give_way=give_way,
    )
    return Dispatcher(
        services.outbox,
        client,
        services.approvals,
        SystemClock(),
        owner=default_owner(),
        options=options,
        channel_refused=ChannelRefusals(services.runtime, services.approvals).refused,
        runs=services.store,
        workspaces=workspace_clients(services, client),
    )


def intake_sweep(services: Services) -> IntakeSweep:
    """Start acknowledged runs whose listener died; forget signatures past replay."""
    return IntakeSweep(services.runtime, services.stores.replays, SystemClock())


def _anchor_job(services: Services) -> list[Job]:
    """Anchor the audit chains' heads in ``SIGNOFF_AUDIT_ANCHOR_FILE``, if set, once changed."""
    path, store, clock = (
        services.settings.audit_anchor_file,
        services.approvals.store,
        SystemClock(),
    )
    if not path:
        return []
    try:  # a tamper-evidence control that cannot write stops the start, not each round
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise SettingsError(
            f"SIGNOFF_AUDIT_ANCHOR_FILE: cannot append to {path}: {exc.strerror or exc}"
        ) from None
    return [
        Job(
            "audit-anchor",
            lambda: anchor_if_changed(store, path, clock.now()),
            services.settings.audit_anchor_interval,
        )
    ]
