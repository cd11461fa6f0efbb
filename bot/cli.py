"""The ``signoff`` command line. Exit status: 0 ok, 2 bad usage or input, 1 other failure."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from agent_runtime import (
    EventAlreadyDelivered,
    InvalidInput,
    InvalidRunState,
    NotSerializable,
    RunId,
    RunNotFound,
    RunStatus,
    Runtime,
    SignoffError,
    WorkflowNotFound,
    parse_run_id,
)
from bot import logs
from bot.render import run_detail, run_json, run_line, step_json
from bot.settings import Settings, SettingsError
from bot.wiring import build_runtime, worker_options
from store import upgrade

USER_ERRORS = (
    RunNotFound, WorkflowNotFound, InvalidInput, InvalidRunState, NotSerializable,
    EventAlreadyDelivered, SettingsError,
)


class UsageError(Exception):
    """The command line itself is wrong (a malformed argument)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"signoff: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        handler: Callable[[argparse.Namespace, Settings], int] = args.handler
        return handler(args, settings)
    except (UsageError, *USER_ERRORS) as exc:
        return _fail(2, exc)
    except SignoffError as exc:
        return _fail(1, exc)
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every subcommand."""
    parser = _Parser(prog="signoff", description="Durable workflows with human sign-off.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    start = commands.add_parser("start", help="start a run of a workflow; prints its id")
    start.add_argument("workflow")
    start.add_argument("--input", default="null", help="the run's input as JSON")
    _json_flag(start).set_defaults(handler=cmd_start)

    worker = commands.add_parser("worker", help="execute runs until stopped")
    worker.add_argument("--concurrency", type=_positive_int, default=4)
    worker.add_argument("--until-idle", action="store_true",
                        help="exit once nothing is in progress here and no run falls due "
                             "within a lease TTL (a dead worker's runs are taken over first)")
    worker.set_defaults(handler=cmd_worker)

    runs = commands.add_parser("runs", help="list recent runs")
    runs.add_argument("--status", choices=[s.value for s in RunStatus])
    runs.add_argument("--limit", type=_positive_int, default=50)
    _json_flag(runs).set_defaults(handler=cmd_runs)

    show = commands.add_parser("show", help="show a run and its journal")
    show.add_argument("run", type=_run_id)
    _json_flag(show).set_defaults(handler=cmd_show)

    for name, help_text, handler in (
        ("cancel", "cancel a pending, running or waiting run", cmd_cancel),
        ("resume", "resume a failed run with the current code, keeping its journal", cmd_resume),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("run", type=_run_id)
        _json_flag(sub).set_defaults(handler=handler)

    sig = commands.add_parser("signal", help="deliver an event to a run")
    sig.add_argument("run", type=_run_id)
    sig.add_argument("key")
    sig.add_argument("--data", default="null", help="the event's data as JSON")
    _json_flag(sig).set_defaults(handler=cmd_signal)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True, parser_class=_Parser)
    db_commands.add_parser("upgrade", help="apply schema migrations").set_defaults(
        handler=cmd_db_upgrade)
    return parser


def cmd_start(args: argparse.Namespace, settings: Settings) -> int:
    """Start a run and print its id."""
    data = _json_argument("--input", args.input)
    run = _runtime(settings).start(args.workflow, data)
    _print(args, run_json(run), run.id)
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    """Execute runs; SIGTERM or Ctrl-C releases the leases and exits."""
    logs.configure()
    runtime = _runtime(settings)
    worker = runtime.worker(worker_options(settings, concurrency=args.concurrency))
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: worker.stop())
    worker.run(until_idle=args.until_idle)
    return 0


def cmd_runs(args: argparse.Namespace, settings: Settings) -> int:
    """List runs, newest first."""
    status = RunStatus(args.status) if args.status else None
    found = _runtime(settings).runs(status=status, limit=args.limit)
    _print(args, [run_json(r) for r in found], "\n".join(run_line(r) for r in found) or "no runs")
    return 0


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    """Show a run with every journal entry."""
    runtime = _runtime(settings)
    run = runtime.get(args.run)
    steps = runtime.journal(args.run)
    attempts = runtime.attempts(args.run)
    data = run_json(run) | {
        "steps": [step_json(s, [a for a in attempts if a.position == s.position]) for s in steps]
    }
    _print(args, data, run_detail(run, steps, attempts))
    return 0


def cmd_cancel(args: argparse.Namespace, settings: Settings) -> int:
    """Cancel a run."""
    run = _runtime(settings).cancel(args.run)
    _print(args, run_json(run), f"cancelled {run.id}")
    return 0


def cmd_resume(args: argparse.Namespace, settings: Settings) -> int:
    """Resume a failed run."""
    run = _runtime(settings).resume(args.run)
    _print(args, run_json(run), f"resumed {run.id}: pending")
    return 0


def cmd_signal(args: argparse.Namespace, settings: Settings) -> int:
    """Deliver an event."""
    data = _json_argument("--data", args.data)
    run = _runtime(settings).signal(args.run, args.key, data)
    _print(args, run_json(run), f"delivered {args.key!r} to {run.id} ({run.status.value})")
    return 0


def cmd_db_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    """Apply migrations."""
    runtime = _runtime(settings, migrate=False)
    upgrade(runtime.store.engine)  # type: ignore[attr-defined]
    print("database is up to date")
    return 0


def _runtime(settings: Settings, *, migrate: bool = True) -> Runtime:
    return build_runtime(settings, migrate=migrate)


def _json_flag(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--json", action="store_true", help="print stable JSON for scripts")
    return parser


def _json_argument(flag: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not valid JSON: {exc.msg} at character {exc.pos}") from None


def _run_id(text: str) -> RunId:
    try:
        return parse_run_id(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a run id") from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return value


def _print(args: argparse.Namespace, data: Any, human: str) -> None:
    if args.json:
        print(json.dumps(data, ensure_ascii=False, sort_keys=True))
    else:
        print(human)


def _fail(code: int, exc: BaseException) -> int:
    print(f"signoff: error: {exc}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
