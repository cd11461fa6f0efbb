"""``signoff dev``: the whole product on one machine, with a local Slack in the browser.

One process runs the sandbox web server (the page, and the Slack Web API under ``/api/`` for
the bot's real ``slack_sdk`` client), the real Bolt app on its own loopback port, the jobs of
serving Slack (``bot.app.jobs``), and the demo payment provider; ``signoff worker`` runs as a
child process that is restarted whenever it dies, with the jobs of executing runs. Everything
is kept in a SQLite file in the dev directory. The page's actions reach the Bolt app only as
signed HTTP requests, as Slack sends them, and the bot answers only through the Web API.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from apscheduler.schedulers.background import BackgroundScheduler

from bot.app.jobs import DEV, jobs
from bot.app.scheduler import build_scheduler
from bot.app.server import slack_app, wsgi
from bot.app.settings import Settings, SettingsError
from bot.app.slack_mode import web_client
from bot.app.wiring import Services, build_services
from bot.slack.ack_gate import AckGate
from bot.slack.after_ack import AfterAck
from devkit.app_thread import RunningApp
from devkit.demo.provider_server import RunningProvider, start_in_thread
from devkit.panel import DevPanel
from devkit.sandbox.app_link import AppLink
from devkit.sandbox.saved import keep_saved, load_workspace
from devkit.sandbox.ui_api import Persona, SandboxUi
from devkit.sandbox.web import PortTaken, SandboxServer, bind_sandbox
from devkit.sandbox.web_api import SlackWebApi
from devkit.sandbox.workspace import Workspace
from devkit.worker_supervisor import WorkerSupervisor, worker_command

logger = logging.getLogger(__name__)

PERSONAS = (
    Persona("U_RITA", "rita", "Rita", "requester"),
    Persona("U_DANA", "dana", "Dana", "approver"),
    Persona("U_OMAR", "omar", "Omar", "approver"),
    Persona("U_EVE", "eve", "Eve", "outsider"),
)
APPROVERS = ("U_DANA", "U_OMAR")
DEV_DEFAULTS = {
    "SIGNOFF_LEASE_TTL_SECONDS": "3",
    "SIGNOFF_POLL_INTERVAL_SECONDS": "0.2",
    "SIGNOFF_ASSISTANT_STATUS": "1",  # the page shows a waiting run's thread status
}
DROPPED = ("SLACK_APP_TOKEN", "SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "SIGNOFF_PORT")


@dataclass(frozen=True, slots=True, kw_only=True)
class DevOptions:
    """How ``signoff dev`` runs: where it listens and keeps its files."""

    port: int = 3000
    host: str = "127.0.0.1"
    data_dir: Path = Path("signoff-dev")
    concurrency: int = 4
    reset: bool = False

    @property
    def database(self) -> Path:
        """Return the SQLite file of runs, approvals and the outbox."""
        return self.data_dir / "signoff.db"

    @property
    def ledger(self) -> Path:
        """Return the demo payment provider's ledger file."""
        return self.data_dir / "ledger.db"

    @property
    def worker_log(self) -> Path:
        """Return the file the worker child writes its log to."""
        return self.data_dir / "worker.log"

    @property
    def slack_file(self) -> Path:
        """Return the file the sandbox keeps its channels, messages and cards in."""
        return self.data_dir / "slack.json"

    @property
    def hold_file(self) -> Path:
        """Return the provider's "hold the next refund's response" file."""
        return self.data_dir / "hold-after-charge"


@dataclass(frozen=True, slots=True)
class DevSecrets:
    """The signing secret and bot token of one dev session, made up fresh each time."""

    signing_secret: str
    bot_token: str

    @classmethod
    def generate(cls) -> DevSecrets:
        """Return new random secrets."""
        return cls(
            signing_secret=secrets.token_hex(32), bot_token=f"xoxb-dev-{secrets.token_hex(24)}"
        )


def dev_environment(
    base: Mapping[str, str],
    options: DevOptions,
    found: DevSecrets,
    *,
    api_url: str,
    provider_url: str,
) -> dict[str, str]:
    """Return the environment of the dev session: the parent's settings and the worker's."""
    env = {k: v for k, v in base.items() if k not in DROPPED}
    for name, value in DEV_DEFAULTS.items():
        env.setdefault(name, value)
    no_proxy = [p for p in env.get("NO_PROXY", "").split(",") if p.strip()]
    env.update(
        {
            "SIGNOFF_DATABASE_URL": f"sqlite:///{options.database.resolve()}",
            "SIGNOFF_DEMO": "1",
            "SIGNOFF_DEMO_PROVIDER_URL": provider_url,
            "SIGNOFF_DEMO_LEDGER_PATH": str(options.ledger.resolve()),
            "SIGNOFF_APPROVERS": ",".join(APPROVERS),
            "SIGNOFF_SLACK_API_URL": api_url,
            "SLACK_BOT_TOKEN": found.bot_token,
            "SLACK_SIGNING_SECRET": found.signing_secret,
            "NO_PROXY": ",".join(dict.fromkeys([*no_proxy, "127.0.0.1", "localhost"])),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


@dataclass
class DevStack:
    """A running dev session; ``stop()`` ends every part, the worker child included."""

    options: DevOptions
    settings: Settings
    services: Services
    workspace: Workspace
    web: SandboxServer
    app: RunningApp
    provider: RunningProvider
    worker: WorkerSupervisor
    scheduler: BackgroundScheduler
    _cleanup: contextlib.ExitStack

    @property
    def url(self) -> str:
        """Return the page's URL."""
        return self.web.url

    def stop(self) -> None:
        """Stop the worker (SIGTERM, then SIGKILL), the scheduler, the servers, the provider."""
        self._cleanup.close()


def start_dev(options: DevOptions, base_env: Mapping[str, str]) -> DevStack:
    """Start every part of the dev session and return it.

    Claims the port first: raises SettingsError (and starts nothing) if it is taken.
    """
    try:
        web = bind_sandbox(options.port, options.host)
    except PortTaken:
        raise SettingsError(
            f"port {options.port} on {options.host} is already in use; choose another with --port"
        ) from None
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(web.stop)
        if options.reset:
            reset(options)
        options.data_dir.mkdir(parents=True, exist_ok=True)
        _release_hold(options.hold_file)
        provider = start_in_thread(
            options.ledger, host=options.host, pause_after_charge_file=options.hold_file
        )
        cleanup.callback(provider.stop)
        found = DevSecrets.generate()
        env = dev_environment(
            base_env, options, found, api_url=web.api_url, provider_url=provider.url
        )
        settings = Settings.from_env(env)
        services = build_services(settings, stream_traces=True)
        cleanup.callback(services.stores.close)
        cleanup.callback(services.shutdown)
        workspace = load_workspace(options.slack_file)
        cleanup.callback(keep_saved(workspace, options.slack_file))
        client = web_client(settings)
        acks = AckGate()
        after_acks = AfterAck(acks)
        cleanup.callback(after_acks.close)  # (again: both close and stop may run twice)
        app = RunningApp(
            wsgi(slack_app(services, client, after_acks), acks=acks), host=options.host
        )
        cleanup.callback(app.stop)
        link = AppLink(
            workspace,
            request_url=app.request_url,
            signing_secret=found.signing_secret,
            response_url_base=web.response_url_base,
        )
        worker = WorkerSupervisor(
            worker_command(options.concurrency), env, log_path=options.worker_log
        )
        panel = DevPanel(services.runtime, provider.ledger, worker, hold_file=options.hold_file)
        ui = SandboxUi(workspace, link, PERSONAS, panel=panel, title="Signoff dev")
        web.start(SlackWebApi(workspace, tokens=(found.bot_token,)), ui)
        cleanup.callback(web.stop)
        # on the way out, before the local Slack stops: the app takes no more requests,
        # then what it acknowledged is carried out (it may post to that Slack)
        cleanup.callback(after_acks.close)
        cleanup.callback(app.stop)
        scheduler = build_scheduler(jobs(services, DEV, acks=acks))
        scheduler.start()
        cleanup.callback(scheduler.shutdown, wait=True)
        worker.start()
        cleanup.callback(worker.stop)
        cleanup.callback(_release_hold, options.hold_file)
        stack = DevStack(
            options,
            settings,
            services,
            workspace,
            web,
            app,
            provider,
            worker,
            scheduler,
            cleanup.pop_all(),
        )
    return stack


def reset(options: DevOptions) -> None:
    """Delete the dev session's files (only those: DIR may hold other things)."""
    for path in (options.database, options.ledger):
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    for path in (
        options.slack_file,
        options.worker_log,
        options.hold_file,
        Path(f"{options.hold_file}.arm"),
    ):
        path.unlink(missing_ok=True)


def _release_hold(hold_file: Path) -> None:
    """Let a held refund answer (and disarm the hold), so the worker can stop at once."""
    Path(f"{hold_file}.arm").unlink(missing_ok=True)
    hold_file.unlink(missing_ok=True)


def run_dev(
    options: DevOptions,
    base_env: Mapping[str, str],
    stop: threading.Event,
    *,
    say: Callable[[str], None] = print,
) -> int:
    """Start the dev session, tell where to open it, and run until ``stop`` is set."""
    stack = start_dev(options, base_env)
    try:
        for line in banner(stack):
            say(line)
        while not stop.wait(0.5):
            pass
        say("signoff dev: stopping")
    finally:
        stack.stop()
    return 0


def banner(stack: DevStack) -> list[str]:
    """The lines ``signoff dev`` prints once everything runs."""
    people: dict[str, list[str]] = {p.role: [] for p in PERSONAS}
    for persona in PERSONAS:
        people[persona.role].append(persona.real_name)
    roles = " · ".join(
        f"{', '.join(names)} ({role}{'s' if len(names) > 1 else ''})"
        for role, names in people.items()
    )
    data = stack.options.data_dir
    return [
        f"signoff dev: open {stack.url} in a browser",
        f"  people   {roles}",
        "  try      /agent refund order 1042 and email the customer",
        f"  data     {data}/ (signoff.db, ledger.db, slack.json, worker.log); --reset: afresh",
        f"  slack    Web API {stack.web.api_url} · app {stack.app.request_url}",
        "  Ctrl-C stops everything",
    ]
