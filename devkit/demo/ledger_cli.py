"""``signoff demo provider`` and ``signoff demo ledger``, ready to be wired into ``bot.cli.main``.

``add_demo_commands(commands)`` adds a ``demo`` command to the ``signoff`` subparsers; each
leaf sets ``handler`` to a function taking the parsed arguments (and ignoring anything
after them, so ``bot.cli.main.main`` can call it as ``handler(args, settings)``). Defaults are
parameters, for the caller to take from settings. ``python -m devkit.demo.ledger_cli demo ...``
runs the same commands before they are wired in.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, NoReturn

from devkit.demo.errors import ProviderError
from devkit.demo.provider_server import DEFAULT_HOST, serve

DEFAULT_PORT: Final = 8765
DEFAULT_LEDGER_PATH: Final = "./signoff-demo-ledger.db"
DEFAULT_PROVIDER_URL: Final = "http://127.0.0.1:8765"
REQUEST_TIMEOUT_S: Final = 10.0
_COLUMNS: Final = ("SEQ", "TIME (UTC)", "METHOD", "PATH", "IDEMPOTENCY KEY", "STATUS", "CHARGE")


class LedgerUnavailable(Exception):
    """The running provider's ledger cannot be read."""


def add_demo_commands(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    *,
    port: int = DEFAULT_PORT,
    ledger_path: str = DEFAULT_LEDGER_PATH,
    provider_url: str = DEFAULT_PROVIDER_URL,
) -> argparse.ArgumentParser:
    """Add ``demo provider`` and ``demo ledger`` to ``subparsers``; return the ``demo`` parser."""
    demo = subparsers.add_parser("demo", help="the demo payment provider and its ledger")
    commands = demo.add_subparsers(dest="demo_command", required=True, parser_class=type(demo))

    provider = commands.add_parser(
        "provider", help="run the demo payment provider until SIGTERM or Ctrl-C"
    )
    provider.add_argument(
        "--port",
        type=_port,
        default=port,
        help=f"port to listen on (0: any free port; default {port})",
    )
    provider.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})"
    )
    provider.add_argument(
        "--ledger",
        default=ledger_path,
        metavar="PATH",
        help=f"SQLite file keeping the ledger (default {ledger_path})",
    )
    provider.add_argument(
        "--pause-after-charge-file",
        metavar="PATH",
        default=None,
        help="fault injection for crash tests: once PATH.arm exists, hold the "
        "next new refund's response until PATH is deleted",
    )
    provider.set_defaults(handler=cmd_demo_provider)

    ledger = commands.add_parser("ledger", help="show every request the demo provider received")
    ledger.add_argument(
        "--url", default=provider_url, help=f"the running provider's URL (default {provider_url})"
    )
    ledger.add_argument("--json", action="store_true", help="print stable JSON for scripts")
    ledger.set_defaults(handler=cmd_demo_ledger)
    return demo


def cmd_demo_provider(args: argparse.Namespace, *_: object) -> int:
    """Serve the demo provider in the foreground; 1 with a one-line error if it cannot."""
    try:
        serve(
            args.port,
            args.ledger,
            host=args.host,
            pause_after_charge_file=args.pause_after_charge_file,
            log=_log,
        )
    except ProviderError as exc:
        return _fail(exc)
    return 0


def cmd_demo_ledger(args: argparse.Namespace, *_: object) -> int:
    """Print the running provider's ledger as a table, or as JSON with ``--json``."""
    try:
        entries = fetch_ledger(args.url)
    except LedgerUnavailable as exc:
        return _fail(exc)
    if args.json:
        print(json.dumps(entries, ensure_ascii=False, sort_keys=True))
    else:
        print(format_ledger(entries))
    return 0


def fetch_ledger(url: str, *, timeout: float = REQUEST_TIMEOUT_S) -> list[dict[str, Any]]:
    """Return ``GET <url>/ledger`` from a running provider."""
    import requests

    endpoint = f"{url.rstrip('/')}/ledger"
    try:
        response = requests.get(endpoint, timeout=timeout)
    except requests.RequestException as exc:
        raise LedgerUnavailable(
            f"cannot reach the demo provider at {url} ({type(exc).__name__}); "
            "is `signoff demo provider` running?"
        ) from None
    if response.status_code != 200:
        raise LedgerUnavailable(f"{endpoint} answered {response.status_code}")
    try:
        entries = response.json()
    except ValueError:
        raise LedgerUnavailable(f"{endpoint} did not answer JSON") from None
    if not isinstance(entries, list):
        raise LedgerUnavailable(f"{endpoint} did not answer a list")
    return entries


def format_ledger(entries: Sequence[dict[str, Any]]) -> str:
    """Return the entries as an aligned table with a closing summary line."""
    if not entries:
        return "no requests yet"
    rows = [_COLUMNS, *(_row(entry) for entry in entries)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    charges = sum(1 for entry in entries if entry.get("created_charge"))
    lines.append(f"{len(entries)} request(s), {charges} charge(s) created")
    return "\n".join(lines)


def _row(entry: dict[str, Any]) -> tuple[str, ...]:
    created = entry.get("created_charge")
    charge = f"yes {entry.get('charge_id') or ''}".rstrip() if created else "no"
    return (
        str(entry.get("seq", "")),
        _time(str(entry.get("at", ""))),
        str(entry.get("method", "")),
        str(entry.get("path", "")),
        entry.get("idempotency_key") or "-",
        str(entry.get("status", "")),
        charge,
    )


def _time(at: str) -> str:
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        return at
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, not {text!r}")
    return value


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _fail(exc: BaseException) -> int:
    print(f"signoff: error: {exc}", file=sys.stderr)
    return 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"signoff: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``demo provider`` or ``demo ledger`` without the rest of the ``signoff`` CLI."""
    parser = _Parser(prog="signoff")
    add_demo_commands(parser.add_subparsers(dest="command", required=True, parser_class=_Parser))
    args = parser.parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
