"""Commands on runs of any workflow: start, worker, runs, show, cancel, resume, signal, db."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from agent_runtime.exceptions import UserError, WorkflowNotFound
from agent_runtime.records import RunStatus
from bot.app.settings import DEFAULT_CONCURRENCY, Settings
from bot.cli.common import (
    Parser,
    actor,
    as_flag,
    cli_user,
    emit,
    json_argument,
    json_flag,
    port_number,
    positive_int,
    run_id,
)
from bot.cli.render import (
    approval_json,
    fork_line,
    fork_origin,
    forks_json,
    history_line,
    run_detail,
    run_json,
    run_line,
    step_json,
)

if TYPE_CHECKING:
    from bot.ops.supervision import Starting


def add_commands(commands: Any) -> None:
    """Add the run commands, ``signoff serve`` and ``signoff history`` to the parser."""
    _add_run_commands(commands)
    add_serve_command(commands)
    add_history_command(commands)


def _add_run_commands(commands: Any) -> None:
    """Add the run commands to the ``signoff`` parser."""
    start = commands.add_parser("start", help="start a run of a workflow; prints its id")
    start.add_argument("workflow")
    start.add_argument("--input", default="null", help="the run's input as JSON")
    json_flag(start).set_defaults(handler=cmd_start)

    worker = commands.add_parser(
        "worker",
        help="execute runs, sweep approvals and send the approvals API's webhooks until stopped",
    )
    worker.add_argument("--concurrency", type=positive_int, default=DEFAULT_CONCURRENCY)
    worker.add_argument(
        "--metrics-port",
        type=port_number,
        default=None,
        help="answer /healthz, /readyz and /metrics on this port",
    )
    worker.add_argument(
        "--until-idle",
        action="store_true",
        help="exit once nothing is in progress here and no run falls due "
        "within a lease TTL (a dead worker's runs are taken over first)",
    )
    worker.set_defaults(handler=cmd_worker)

    runs = commands.add_parser("runs", help="list recent runs")
    runs.add_argument("--status", choices=[s.value for s in RunStatus])
    runs.add_argument("--limit", type=positive_int, default=50)
    runs.add_argument("--after", type=run_id, help="the next page: runs older than this one")
    json_flag(runs).set_defaults(handler=cmd_runs)

    show = commands.add_parser("show", help="show a run, its journal, approvals and usage")
    show.add_argument("run", type=run_id)
    json_flag(show).set_defaults(handler=cmd_show)

    for name, help_text, handler in (
        (
            "cancel",
            "cancel a pending, running or waiting run (and its pending approvals)",
            cmd_cancel,
        ),
        ("resume", "resume a failed run with the current code, keeping its journal", cmd_resume),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("run", type=run_id)
        if name == "cancel":
            as_flag(sub, required=False)
        json_flag(sub).set_defaults(handler=handler)

    sig = commands.add_parser("signal", help="deliver an event to a run")
    sig.add_argument("run", type=run_id)
    sig.add_argument("key")
    sig.add_argument("--data", default="null", help="the event's data as JSON")
    json_flag(sig).set_defaults(handler=cmd_signal)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True, parser_class=Parser)
    db_commands.add_parser("upgrade", help="apply schema migrations").set_defaults(
        handler=cmd_db_upgrade
    )


def cmd_start(args: argparse.Namespace, settings: Settings) -> int:
    """Start a run and print its id."""
    from bot.app.wiring import build_services

    data = json_argument("--input", args.input)
    try:
        run = build_services(settings).runtime.start(args.workflow, data)
    except WorkflowNotFound as exc:
        if exc.name.startswith("demo.") and not settings.demo:
            raise UserError(f"{exc}; the demo.* workflows load with SIGNOFF_DEMO=1") from None
        raise
    emit(args, run_json(run), run.id)
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Execute runs, woken by every run that falls due, sweep approvals and send the
    approvals API's webhooks (``bot.app.jobs``); SIGTERM or Ctrl-C drains (steps in flight
    finish, their runs are released, the trace stream is flushed) within
    ``SIGNOFF_DRAIN_SECONDS`` and exits."""
    from bot.ops import logs
    from bot.ops.http import ops_port
    from bot.ops.supervision import starting

    logs.configure(log_format=settings.log_format, secrets=settings.secrets())
    start = starting()
    with ops_port(start.front, args.metrics_port):
        return _work(args, settings, start)


def _work(args: argparse.Namespace, settings: Settings, start: Starting) -> int:
    """Reach the database, then run the worker and its periodic jobs until drained."""
    from bot.app.jobs import WORKER, WORKER_UNTIL_IDLE, jobs
    from bot.app.scheduler import build_scheduler
    from bot.app.wiring import worker_options
    from bot.ops.http import ops_app
    from bot.ops.supervision import drain_deadline, supervised_services

    services, supervision = supervised_services(settings, start)
    options = worker_options(
        settings,
        concurrency=args.concurrency,
        on_takeover=supervision.metrics.took_over,
        on_claim=supervision.metrics.claimed,
    )
    worker = services.runtime.worker(options)
    supervision.loops.watch("worker", settings.poll_interval, lambda: worker.last_tick)
    deadlines: list[threading.Timer] = []

    def drain(*_: object) -> None:
        if not deadlines:
            deadlines.append(drain_deadline(settings.drain_timeout))
            supervision.watchdog.stop()
        worker.stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, drain)
    duties = WORKER_UNTIL_IDLE if args.until_idle else WORKER
    scheduler = build_scheduler(jobs(services, duties, supervision.metrics), supervision.loops)
    start.up(ops_app(supervision.ops))  # every loop is known now: /readyz checks them all
    supervision.watchdog.start()
    scheduler.start()
    try:
        with services.stores.wake_listener(worker.wake):
            worker.run(until_idle=args.until_idle)
    finally:
        scheduler.shutdown(wait=True)
        services.shutdown()
    for deadline in deadlines:
        deadline.cancel()
    return 0


def cmd_runs(args: argparse.Namespace, settings: Settings) -> int:
    """List runs, newest first (from the runs' store alone: no agent or service is built)."""
    from bot.app.wiring import build_services

    status = RunStatus(args.status) if args.status else None
    found = build_services(settings).store.list_runs(
        status=status, limit=args.limit, after=args.after
    )
    emit(args, [run_json(r) for r in found], "\n".join(run_line(r) for r in found) or "no runs")
    return 0


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    """Show a run with every journal entry, its approvals and (for agents) its usage."""
    from agent_runtime.budget_control import usage_of
    from bot.app.wiring import build_services

    services = build_services(settings)
    runtime = services.runtime
    run = runtime.get(args.run)
    steps = runtime.journal(args.run)
    attempts = runtime.attempts(args.run)
    approvals = services.approvals.store.list_approvals(run_id=run.id)
    agent = services.agents.for_workflow(run.workflow)
    usage = None if agent is None else usage_of(steps, agent).to_json()
    forks = runtime.forks(run.id)
    data = run_json(run) | {
        "steps": [step_json(s, [a for a in attempts if a.position == s.position]) for s in steps],
        "approvals": [approval_json(a) for a in reversed(approvals)],
        "usage": usage,
        "forks": forks_json(forks),
    }
    emit(args, data, run_detail(run, steps, attempts, list(reversed(approvals)), usage, forks))
    return 0


def cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    """Cancel a run (streaming its end when no worker holds it)."""
    from bot.app.wiring import build_services

    services = build_services(settings, stream_traces=True)
    who = actor(args) if args.actor else cli_user()
    try:
        run = services.runtime.cancel(args.run, by=who)
    finally:
        services.shutdown()
    emit(args, run_json(run), f"cancelled {run.id}")
    return 0


def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    """Resume a failed run."""
    from bot.app.wiring import build_services

    run = build_services(settings).runtime.resume(args.run)
    emit(args, run_json(run), f"resumed {run.id}: pending")
    return 0


def cmd_signal(args: argparse.Namespace, settings: Settings) -> int:
    """Deliver an event; exit status 1 when the run waits for something else."""
    from bot.app.wiring import build_services

    data = json_argument("--data", args.data)
    run = build_services(settings).runtime.signal(args.run, args.key, data)
    if run.status == RunStatus.WAITING:
        awaited = "a timer" if run.wait_key is None else f"the event {run.wait_key!r}"
        print(
            f"signoff: run {run.id} waits for {awaited}, not {args.key!r}: it was not "
            f"woken ({args.key!r} is kept for a later wait for it)",
            file=sys.stderr,
        )
        return 1
    emit(args, run_json(run), f"delivered {args.key!r} to {run.id} ({run.status.value})")
    return 0


def cmd_db_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    """Apply migrations, and say what they did."""
    from bot.app.wiring import build_services

    stores = build_services(settings, migrate=False).stores
    before = stores.schema()
    if before.newer:
        print(
            f"the database's schema ({before.current}) is newer than this code's "
            f"({before.latest}): nothing to do here (a later release migrated it)"
        )
        return 0
    found = stores.upgrade()
    after = stores.schema().current
    if found == after:
        print(f"database is up to date (schema at {after})")
    else:
        print(f"database upgraded from {found or 'an empty database'} to {after}")
    return 0


def add_serve_command(commands: Any) -> None:
    """Add ``signoff serve``."""
    serve = commands.add_parser(
        "serve", help="the Slack app (HTTP at /slack/events), workers, scheduler and dispatcher"
    )
    serve.add_argument("--concurrency", type=positive_int, default=DEFAULT_CONCURRENCY)
    serve.add_argument(
        "--socket-mode",
        action="store_true",
        help="connect to Slack over Socket Mode instead of serving HTTP",
    )
    serve.add_argument("--no-http", action="store_true", help="no Slack front end here")
    serve.add_argument("--no-worker", action="store_true", help="no worker here")
    serve.add_argument(
        "--metrics-port",
        type=port_number,
        default=None,
        help="with --no-http or --socket-mode: answer /healthz, /readyz and /metrics on this port",
    )
    serve.add_argument(
        "--no-scheduler",
        action="store_true",
        help="no periodic jobs (approvals sweep, outbox dispatch, webhooks) here",
    )
    serve.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Run the chosen parts in this process until SIGTERM or Ctrl-C."""
    from bot.app.server import Parts, serve
    from bot.ops import logs

    logs.configure(log_format=settings.log_format, secrets=settings.secrets())
    signal.signal(signal.SIGTERM, _interrupt)
    parts = Parts(
        http=not args.no_http,
        worker=not args.no_worker,
        scheduler=not args.no_scheduler,
        socket_mode=args.socket_mode,
        concurrency=args.concurrency,
        metrics_port=args.metrics_port,
    )
    return serve(settings, parts)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt()


def add_history_command(commands: Any) -> None:
    """Add ``signoff history``."""
    history = commands.add_parser(
        "history", help="a run's timeline: steps, durations, attempts, tokens, cost, approvals"
    )
    history.add_argument("run", type=run_id)
    json_flag(history).set_defaults(handler=cmd_history)


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    """Print a run's timeline."""
    from agent_runtime.history import timeline
    from bot.app.wiring import build_services

    services = build_services(settings)
    runtime = services.runtime
    run = runtime.get(args.run)
    entries = timeline(
        run,
        runtime.journal(run.id),
        runtime.attempts(run.id),
        services.approvals.store.list_approvals(run_id=run.id),
        services.agents.for_workflow(run.workflow),
    )
    forks = runtime.forks(run.id)
    head = [run_line(run)]
    if run.forked_from is not None:
        head.append(f"forked {fork_origin(run)}")
    tail = [f"fork {fork_line(f)}" for f in forks]
    emit(
        args,
        {
            "run": run_json(run),
            "timeline": [e.to_json() for e in entries],
            "forks": forks_json(forks),
        },
        "\n".join([*head, *(history_line(e) for e in entries), *tail]),
    )
    return 0
