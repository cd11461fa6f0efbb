"""``signoff serve``: the Slack app over HTTP (or Socket Mode), workers, scheduler, dispatcher."""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient

from agent_runtime import SystemClock, Worker
from agent_runtime.worker import default_owner
from bot.anchor_file import anchor_if_changed
from bot.request_hygiene import MAX_BODY_BYTES, WSGIApp, guarded
from bot.scheduler import Job, build_scheduler
from bot.settings import Settings, SettingsError
from bot.slack.app import SlackDeps, build_app
from bot.slack.channel_refusals import ChannelRefusals
from bot.slack.dispatcher import Dispatcher, DispatchOptions, Pace
from bot.slack.form_request import SlackWsgiHandler
from bot.wiring import Services, build_services, worker_options
from store.notify import WakeListener
from store.replay_guard import SqlReplayGuard

logger = logging.getLogger(__name__)

DISPATCH_EVERY = timedelta(milliseconds=300)


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """Which parts ``serve`` runs in this process."""

    http: bool = True
    worker: bool = True
    scheduler: bool = True
    socket_mode: bool = False
    concurrency: int = 4


def web_client(settings: Settings) -> WebClient:
    """The Slack Web API client, pointed at ``SIGNOFF_SLACK_API_URL``."""
    return WebClient(token=settings.slack_bot_token, base_url=settings.slack_api_url)


def slack_app(services: Services, client: WebClient) -> App:
    """The Bolt app over the services."""
    if not services.settings.slack_signing_secret:
        raise SettingsError("SLACK_SIGNING_SECRET is not set: Slack requests cannot be verified")
    deps = SlackDeps(runtime=services.runtime, approvals=services.approvals,
                     agents=services.agents, outbox=services.outbox, clock=SystemClock(),
                     replays=SqlReplayGuard(services.store.engine))
    return build_app(deps, client, services.settings.slack_signing_secret)


def wsgi(app: App) -> WSGIApp:
    """A WSGI application: Slack at ``/slack/events``, a health check at ``/healthz``."""
    handler = guarded(SlackWsgiHandler(app))

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == "/slack/events":
            return handler(environ, start_response)
        if path == "/healthz":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok\n"]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]

    return application


def dispatcher(services: Services, client: WebClient) -> Dispatcher:
    """The outbox dispatcher of this process."""
    settings = services.settings
    options = DispatchOptions(claim_for=settings.outbox_claim,
                              backoff_cap=settings.outbox_backoff_cap,
                              pace=Pace(every=settings.slack_post_interval,
                                        burst=settings.slack_post_burst))
    refusals = ChannelRefusals(services.runtime, services.approvals)
    return Dispatcher(services.outbox, client, services.approvals, SystemClock(),
                      owner=default_owner(), options=options, channel_refused=refusals.refused)


def serve(settings: Settings, parts: Parts) -> int:
    """Run the chosen parts until SIGTERM or Ctrl-C."""
    services = build_services(settings, stream_traces=True)
    client = web_client(settings)
    worker = services.runtime.worker(worker_options(settings, concurrency=parts.concurrency))
    stop = threading.Event()
    threads = [threading.Thread(target=worker.run, name="signoff-worker", daemon=True)] \
        if parts.worker else []
    scheduler = build_scheduler(_jobs(services, client, worker)) if parts.scheduler else None
    listener = WakeListener(services.store.engine, worker.wake) if parts.worker else None
    for thread in threads:
        thread.start()
    if scheduler is not None:
        scheduler.start()
    if listener is not None:
        listener.start()
    try:
        _front(services, client, settings, parts, stop)
    finally:
        worker.stop()
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        if listener is not None:
            listener.stop()
        for thread in threads:
            thread.join(timeout=30)
        services.shutdown()
    return 0


def _jobs(services: Services, client: WebClient, worker: Worker) -> list[Job]:
    poll = services.settings.poll_interval
    return [
        Job("dispatch", dispatcher(services, client).drain, DISPATCH_EVERY),
        Job("approvals", services.approvals.sweep, poll),
        Job("wake", worker.wake, poll),
        *_anchor_job(services),
    ]


def _anchor_job(services: Services) -> list[Job]:
    """Anchor the audit log's head in ``SIGNOFF_AUDIT_ANCHOR_FILE``, if set, when it changed."""
    path, store, clock = (services.settings.audit_anchor_file, services.approvals.store,
                          SystemClock())
    if not path:
        return []
    return [Job("audit-anchor", lambda: anchor_if_changed(store, path, clock.now()),
                services.settings.audit_anchor_interval)]


def _front(services: Services, client: WebClient, settings: Settings, parts: Parts,
           stop: threading.Event) -> None:
    if parts.socket_mode:
        _socket_mode(slack_app(services, client), settings)
    elif parts.http:
        _http(wsgi(slack_app(services, client)), settings.port)
    else:
        _wait_forever(stop)


def _http(application: WSGIApp, port: int) -> None:
    from waitress.server import create_server

    try:
        server = create_server(application, host="0.0.0.0", port=port,  # noqa: S104
                               threads=8, max_request_body_size=MAX_BODY_BYTES)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise SettingsError(f"port {port} is already in use (set SIGNOFF_PORT)") from None
        raise
    logger.info("listening", extra={"action": f"http://0.0.0.0:{port}/slack/events"})
    try:
        server.run()
    finally:
        server.close()


def _socket_mode(app: App, settings: Settings) -> None:
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    if not settings.slack_app_token:
        raise SettingsError("Socket Mode needs SLACK_APP_TOKEN (an xapp- token)")
    SocketModeHandler(app, settings.slack_app_token).start()  # type: ignore[no-untyped-call]


def _wait_forever(stop: threading.Event) -> None:
    while not stop.wait(3600):
        pass
