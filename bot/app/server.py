"""``signoff serve``: the Slack app over HTTP (or Socket Mode), workers, scheduler, dispatcher."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from slack_bolt import App
from slack_sdk import WebClient

from agent_runtime import SystemClock, Worker
from bot.api.http import api_app
from bot.api.service import ApiApprovals
from bot.app.jobs import SERVE, jobs
from bot.app.request_hygiene import WSGIApp, guarded
from bot.app.scheduler import build_scheduler
from bot.app.serving import run_wsgi
from bot.app.settings import Settings, SettingsError
from bot.app.slack_mode import allowed_workspaces, bolt_auth, is_oauth, uninstalls, web_client
from bot.app.wiring import Services, worker_options
from bot.ops.http import Ops, ops_app, ops_port
from bot.ops.supervision import Supervision, drain_deadline, supervised_services
from bot.slack.app import SlackDeps, build_app
from bot.slack.form_request import SlackWsgiHandler
from bot.slack.oauth import INSTALL_PATH, REDIRECT_PATH
from store import WakeListener

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """Which parts ``serve`` runs in this process."""

    http: bool = True
    worker: bool = True
    scheduler: bool = True
    socket_mode: bool = False
    concurrency: int = 4
    metrics_port: int | None = None
    """Where to answer ``/healthz``, ``/readyz`` and ``/metrics`` without the HTTP front."""


def slack_app(services: Services, client: WebClient) -> App:
    """The Bolt app over the services."""
    if not services.settings.slack_signing_secret:
        raise SettingsError("SLACK_SIGNING_SECRET is not set: Slack requests cannot be verified")
    deps = SlackDeps(
        runtime=services.runtime,
        approvals=services.approvals,
        grants=services.grants,
        agents=services.agents,
        outbox=services.outbox,
        clock=SystemClock(),
        replays=services.stores.replays,
        models=services.models,
    )
    return build_app(
        deps,
        client,
        services.settings.slack_signing_secret,
        auth=bolt_auth(services, client),
        uninstalls=uninstalls(services),
        allowed=allowed_workspaces(services.settings),
    )


def wsgi(app: App, ops: Ops | None = None, api: ApiApprovals | None = None) -> WSGIApp:
    """A WSGI application: Slack at ``/slack/events`` (and the install flow at
    ``/slack/install`` and ``/slack/oauth_redirect`` in OAuth mode); with ``ops``, also
    ``/healthz``, ``/readyz`` and ``/metrics``; with ``api``, the approvals API at ``/v1/``."""
    handler = guarded(SlackWsgiHandler(app))
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
    if parts.socket_mode and is_oauth(settings):
        raise SettingsError(
            "Socket Mode serves the one workspace of SLACK_BOT_TOKEN; "
            "SIGNOFF_SLACK_MODE=oauth needs the HTTP front (drop --socket-mode)"
        )
    services, supervision = supervised_services(settings)
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
    scheduler = (
        build_scheduler(jobs(services, SERVE, supervision.metrics), supervision.loops)
        if parts.scheduler
        else None
    )
    listener = services.stores.wake_listener(worker.wake) if parts.worker else None
    for thread in threads:
        thread.start()
    if scheduler is not None:
        scheduler.start()
    if listener is not None:
        listener.start()
    supervision.watchdog.start()
    try:
        _front(services, client, settings, parts, supervision.ops)
    finally:
        _drain(services, supervision, worker, threads, scheduler, listener)
    return 0


def _drain(
    services: Services,
    supervision: Supervision,
    worker: Worker,
    threads: list[threading.Thread],
    scheduler: BackgroundScheduler | None,
    listener: WakeListener | None,
) -> None:
    deadline = drain_deadline(services.settings.drain_timeout)
    logger.info("draining", extra={"action": "drain"})
    supervision.watchdog.stop()
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
    services: Services, client: WebClient, settings: Settings, parts: Parts, ops: Ops
) -> None:
    if parts.socket_mode:
        with ops_port(ops, parts.metrics_port):
            _socket_mode(slack_app(services, client), settings)
    elif parts.http:
        _http(wsgi(slack_app(services, client), ops, api_approvals(services)), settings.port)
    else:
        with ops_port(ops, parts.metrics_port):
            _wait_forever()


def _http(application: WSGIApp, port: int) -> None:
    run_wsgi(application, port, "0.0.0.0", flag="set SIGNOFF_PORT", path="/slack/events")  # noqa: S104


def _socket_mode(app: App, settings: Settings) -> None:
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    if not settings.slack_app_token:
        raise SettingsError("Socket Mode needs SLACK_APP_TOKEN (an xapp- token)")
    handler = SocketModeHandler(
        app,
        settings.slack_app_token,
        ping_interval=settings.socket_ping_interval.total_seconds(),
    )
    handler.start()  # type: ignore[no-untyped-call]


def _wait_forever() -> None:
    """Keep the main thread (the one SIGTERM interrupts) until the process is stopped."""
    while True:
        time.sleep(3600)
