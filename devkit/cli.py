"""``signoff dev`` and ``signoff demo``: the dev tools' commands, which the ``signoff``
command line finds through the ``signoff.commands`` entry point."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

from bot.app.settings import Settings
from bot.cli.common import port_number, positive_int
from devkit.demo.ledger_cli import add_demo_commands


def add_demo_command(commands: Any, settings: Settings) -> None:
    """Add ``signoff demo provider|ledger`` to the ``signoff`` parser."""
    add_demo_commands(
        commands,
        port=settings.demo_provider_port,
        ledger_path=settings.demo_ledger_path,
        provider_url=settings.demo_provider_url,
    )


def add_dev_command(commands: Any, settings: Settings) -> None:
    """Add ``signoff dev`` to the ``signoff`` parser."""
    dev = commands.add_parser(
        "dev", help="the whole product on this machine, with a local Slack in the browser"
    )
    dev.add_argument(
        "--port",
        type=port_number,
        default=3000,
        help="where the page and the sandbox Slack listen (default 3000; 0: any free port)",
    )
    dev.add_argument(
        "--dir",
        type=Path,
        default=Path("signoff-dev"),
        metavar="DIR",
        help="where the dev database, ledger and worker log live "
        "(default ./signoff-dev, created if missing)",
    )
    dev.add_argument(
        "--reset",
        action="store_true",
        help="delete DIR first: no runs, no approvals, an empty ledger",
    )
    dev.add_argument(
        "--concurrency", type=positive_int, default=4, help="runs the worker child executes at once"
    )
    dev.set_defaults(handler=cmd_dev)


def cmd_dev(args: argparse.Namespace, settings: Settings) -> int:
    """Run the dev session until Ctrl-C or SIGTERM; exit 2 if the port is taken."""
    from bot.ops import logs
    from devkit.dev import DevOptions, run_dev

    logs.configure(log_format=settings.log_format, secrets=settings.secrets())
    logging.getLogger("apscheduler").setLevel(logging.ERROR)  # skipped overlapping rounds
    stop = threading.Event()
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:
        signal.signal(signum, lambda *_: stop.set())
    try:
        options = DevOptions(
            port=args.port, data_dir=args.dir, reset=args.reset, concurrency=args.concurrency
        )
        return run_dev(options, dict(os.environ), stop, say=_say)
    finally:
        for signum, handler in previous.items():
            with suppress(TypeError, ValueError):
                signal.signal(signum, handler)


def _say(line: str) -> None:
    print(line, flush=True)


__all__ = ["add_demo_command", "add_dev_command", "cmd_dev"]
