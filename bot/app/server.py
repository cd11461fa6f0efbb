"""``signoff serve``: the Slack app over HTTP (or Socket Mode), workers, scheduler, dispatcher."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.error import URLError

from apscheduler.schedulers.background import BackgroundScheduler
from slack_bolt import App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime import SystemClock, Worker
from bot.api.http import api_app
from bot.api.service import ApiApprovals
from bot.app.jobs import SERVE, jobs
from bot.app.request_hygiene import WSGIApp, guarded
from bot.app.scheduler import build_scheduler
from bot.app.serving import HTTP_THREADS, waitress_wsgi
from bot.app.settings import DEFAULT_CONCURRENCY, Settings, SettingsError
from bot.app.slack_mode import allowed_workspaces, bolt_auth, uninstalls, web_client
from bot.app.starting import starting_slack
from bot.app.wiring import Services, worker_options
from bot.ops.http import Front, Ops, ops_app, ops_port
from bot.ops.supervision import (
    Starting,
    Supervision,
    drain_deadline,
    starting,
    supervised_services,
)
from bot.slack.ack_gate import AckGate
from bot.slack.after_ack import AfterAck
from bot.slack.app import SlackDeps, build_app
from bot.slack.form_request import SlackWsgiHandler
from bot.slack.oauth import INSTALL_PATH, REDIRECT_PATH
from store import WakeListener

if TYPE_CHECKING:
    from slack_bolt.adapter.socket_mode import SocketModeHandler

logger = logging.getLogger(__name__)

EVENTS = "/slack/events"


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """Which parts ``serve`` runs in this process."""

    http: bool = True
    worker: bool = True
    scheduler: bool = True
    socket_mode: bool = False
    concurrency: int = DEFAULT_CONCURRENCY
    metrics_port: int | None = None
    """Where to answer ``/healthz``, ``/readyz`` and ``/metrics`` without the HTTP front."""


def signing_secret(settings: Settings) -> str:
    """Return the secret Slack signs its requests with, which must be set."""
    if not settings.slack_signing_secret:
        raise SettingsError("SLACK_SIGNING_SECRET is not set: Slack requests cannot be verified")
    return settings.slack_signing_secret


def bot_token(settings: Settings) -> str:
    """Return the bot token a front for one workspace answers and posts with, which must be
    set (started without it, it took commands, then failed every message to Slack)."""
    if not settings.slack_bot_token:
        raise SettingsError(
            "SLACK_BOT_TOKEN is not set: the Slack front could answer nothing back "
            "(set it, or SIGNOFF_SLACK_MODE=oauth to serve installed workspaces)"
        )
    return settings.slack_bot_token


def slack_app(services: Services, client: WebClient, after_acks: AfterAck | None = None) -> App:
    """The Bolt app over the services (what follows its acks carried out by ``after_acks``)."""
    secret = signing_secret(services.settings)
    deps = SlackDeps(
        runtime=services.runtime,
        approvals=services.approvals,
        grants=services.grants,
        agents=services.agents,
        outbox=services.outbox,
        clock=SystemClock(),
        replays=services.stores.replays,
        home_tabs=services.stores.home_tabs,
        models=services.models,
    )
    return build_app(
        deps,
        client,
        secret,
        auth=bolt_auth(services, client),
        uninstalls=uninstalls(services),
        allowed=allowed_workspaces(services.settings),
        after_acks=after_acks,
    )


def wsgi(
    app: App,
    ops: Ops | None = None,
    api: ApiApprovals | None = None,
    *,
    acks: AckGate | None = None,
) -> WSGIApp:
    """A WSGI application: Slack at ``/slack/events`` (and the install flow at
    ``/slack/install`` and ``/slack/oauth_redirect`` in OAuth mode); with ``ops``, also
    ``/healthz``, ``/readyz`` and ``/metrics``; with ``api``, the approvals API at ``/v1/``.
    Each request to ``/slack/events`` counts at ``acks`` (if given) while it is answered."""
    handler = guarded(SlackWsgiHandler(app))
    if acks is not None:
        handler = acks.counted(handler)
    oauth = SlackWsgiHandler(app) if app.oauth_flow is not None else None

    def slack_only(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == "/slack/events":
            return handler(environ, start_response)
        if oauth is not None and path in (INSTALL_PATH, REDIRECT_PATH):
            return oauth(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]

    front = slack_only if api is None else api_app(api, fallback=slack_only)
    return front if ops is None else ops_app(ops, fallback=front)


def api_approvals(services: Services) -> ApiApprovals:
    """The approvals API's service over the process's services."""
    return ApiApprovals(services, services.stores.api)


def serve(settings: Settings, parts: Parts) -> int:
    """Run the chosen parts until SIGTERM or Ctrl-C, then drain: stop taking Slack requests
    and claiming runs, let each step in flight finish and its run be released, let the
    outbox round in flight finish; all within ``SIGNOFF_DRAIN_SECONDS``."""
    if parts.socket_mode and settings.is_oauth:
        raise SettingsError(
            "Socket Mode serves the one workspace of SLACK_BOT_TOKEN; "
            "SIGNOFF_SLACK_MODE=oauth needs the HTTP front (drop --socket-mode)"
        )
    if (parts.http or parts.socket_mode) and not settings.is_oauth:
        bot_token(settings)
    http = parts.http and not parts.socket_mode
    # with --metrics-port, the operator's endpoints are served there, not beside Slack
    apart = http and parts.metrics_port is not None
    early = starting_slack(signing_secret(settings)) if http else None
    start = starting(None if apart else early)
    public = (Front(early) if apart else start.front) if early is not None else None
    with ExitStack() as listener:
        listener.enter_context(_listening(start.front, public, settings, parts))
        services, supervision = supervised_services(settings, start)
        client = web_client(settings)
        options = worker_options(
            settings,
            concurrency=parts.concurrency,
            on_takeover=supervision.metrics.took_over,
            on_claim=supervision.metrics.claimed,
        )
        worker = services.runtime.worker(options)
        threads = (
            [threading.Thread(target=worker.run, name="signoff-worker", daemon=True)]
            if parts.worker
            else []
        )
        if parts.worker:
            supervision.loops.watch("worker", settings.poll_interval, lambda: worker.last_tick)
        give_way = worker.turns.wait_turn if parts.worker else None
        # Slack's requests are answered first: what follows an ack and the outbox rounds
        # wait while the HTTP front answers any (bot.slack.ack_gate)
        acks = AckGate()
        # what follows an ack: carried out before the process goes (see _drain)
        after_acks = AfterAck(acks) if parts.http or parts.socket_mode else None
        scheduler = (
            build_scheduler(
                jobs(services, SERVE, supervision.metrics, give_way, acks=acks),
                supervision.loops,
            )
            if parts.scheduler
            else None
        )
        wake = services.stores.wake_listener(worker.wake) if parts.worker else None
        for thread in threads:
            thread.start()
        if scheduler is not None:
            scheduler.start()
        if wake is not None:
            wake.start()
        supervision.watchdog.start()
        try:
            _front(services, client, parts, supervision.ops, start, public, acks, after_acks)
        finally:
            listener.close()  # no more requests, then drain
            _drain(services, supervision, worker, threads, scheduler, wake, after_acks)
    return 0


def _drain(
    services: Services,
    supervision: Supervision,
    worker: Worker,
    threads: list[threading.Thread],
    scheduler: BackgroundScheduler | None,
    listener: WakeListener | None,
    after_acks: AfterAck | None,
) -> None:
    deadline = drain_deadline(services.settings.drain_timeout)
    logger.info("draining", extra={"action": "drain"})
    supervision.watchdog.stop()
    if after_acks is not None:
        after_acks.close()  # what was acknowledged is done (a run created, a click decided)
    worker.stop()
    if scheduler is not None:
        scheduler.shutdown(wait=True)  # the outbox round in flight finishes
    if listener is not None:
        listener.stop()
    for thread in threads:
        thread.join()
    services.shutdown()
    deadline.cancel()
    logger.info("drained", extra={"action": "drain"})


def _front(
    services: Services,
    client: WebClient,
    parts: Parts,
    ops: Ops,
    start: Starting,
    public: Front | None,
    acks: AckGate,
    after_acks: AfterAck | None,
) -> None:
    """Hand the listeners over to the process's own apps, then serve until stopped: Slack
    (and the approvals API) on ``public``, with the operator's endpoints unless ``start``
    has a listener of its own (``--metrics-port``)."""
    if parts.socket_mode:
        app = slack_app(services, client, after_acks)
        start.up(ops_app(ops))
        _socket_mode(app, services.settings)
        return
    if public is not None:
        # each request thread writes one signature before its ack: open their connections now
        services.stores.replays.warm(HTTP_THREADS)
        app = slack_app(services, client, after_acks)
        if public is start.front:  # the operator's endpoints beside Slack
            start.up(wsgi(app, ops, api_approvals(services), acks=acks))
            return _wait_forever()
        public.up(wsgi(app, None, api_approvals(services), acks=acks))
    start.up(ops_app(ops))
    _wait_forever()


@contextmanager
def _listening(
    ops: Front, public: Front | None, settings: Settings, parts: Parts
) -> Iterator[None]:
    """Listen while the block runs: with ``public`` (the HTTP front, which may be ``ops``)
    on ``SIGNOFF_PORT``, and with ``ops`` (the operator's endpoints) on ``--metrics-port``
    if given."""
    with ExitStack() as listeners:
        if public is not None:
            host = "0.0.0.0"  # noqa: S104
            listeners.enter_context(
                waitress_wsgi(public, settings.port, host, flag="set SIGNOFF_PORT", path=EVENTS)
            )
        listeners.enter_context(ops_port(ops, parts.metrics_port))
        yield


def _socket_mode(app: App, settings: Settings) -> None:
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    if not settings.slack_app_token:
        raise SettingsError("Socket Mode needs SLACK_APP_TOKEN (an xapp- token)")
    handler = SocketModeHandler(
        app,
        settings.slack_app_token,
        ping_interval=settings.socket_ping_interval.total_seconds(),
    )
    try:
        _connect(handler)
        logger.info("connected to Slack over Socket Mode", extra={"action": "socket"})
        _wait_forever()
    finally:
        _stop_socket(handler)


REFUSED_APP_TOKEN = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "not_allowed_token_type"}
)
"""What Slack answers ``apps.connections.open`` with for an app token it will never take."""


def _connect(handler: SocketModeHandler) -> None:
    """Open the Socket Mode connection; while Slack cannot be reached, try again with backoff
    (as the HTTP front waits for Slack's requests). An app token Slack refuses is a
    ``SettingsError``: no retry can fix it."""
    pause = 0.5
    while True:
        try:
            handler.connect()  # type: ignore[no-untyped-call]
            return
        except SlackApiError as exc:
            error = str(exc.response.get("error", ""))
            if error in REFUSED_APP_TOKEN:
                raise SettingsError(f"Slack refused SLACK_APP_TOKEN ({error})") from None
            cause: Exception = exc
        except (OSError, URLError) as exc:  # unreachable, reset, timed out
            cause = exc
        logger.warning(
            "Slack unreachable for Socket Mode (%s: %s); trying again",
            type(cause).__name__,
            cause,
            extra={"action": "socket"},
        )
        time.sleep(pause)
        pause = min(pause * 2, 30.0)


def _stop_socket(handler: SocketModeHandler) -> None:
    """Take no more envelopes (Slack resends no command or click: one not acknowledged shows
    its sender that the app did not answer, never a silent loss), let those being handled
    finish and send their acks on the open socket, then disconnect; the drain
    then carries out what they handed over. (``closed`` ends the loop of the thread that
    hands envelopes from the queue to the workers once it reads the ``None`` put behind
    them, and ``close`` would disconnect before waiting for the workers: ``slack_sdk``'s
    builtin client's own parts.)"""
    client = handler.client
    client.closed = True
    client.message_queue.put(None)  # behind the envelopes taken: what the loop reads last
    logger.info("taking no more Socket Mode envelopes", extra={"action": "drain"})
    client.message_processor.shutdown()  # type: ignore[no-untyped-call]
    client.message_workers.shutdown(wait=True)
    handler.close()  # type: ignore[no-untyped-call]


def _wait_forever() -> None:
    """Keep the main thread (the one SIGTERM interrupts) until the process is stopped."""
    while True:
        time.sleep(3600)
