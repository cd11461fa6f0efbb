"""``signoff api-key create|list|revoke``: the keys of clients of the approvals API."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from bot.app.settings import Settings
from bot.cli.common import UsageError, emit, json_flag

if TYPE_CHECKING:
    from store import ApiKey, SqlApiStore


def add_commands(commands: Any) -> None:
    """Add ``signoff api-key`` and its subcommands."""
    keys = commands.add_parser("api-key", help="keys of the approvals API's clients")
    sub: Any = keys.add_subparsers(dest="api_key_command", required=True, parser_class=type(keys))
    create = sub.add_parser("create", help="create a client and show its key (once)")
    create.add_argument("--name", required=True, help="the client's name")
    json_flag(create).set_defaults(handler=cmd_create)
    listing = sub.add_parser("list", help="list the clients (never their keys)")
    json_flag(listing).set_defaults(handler=cmd_list)
    revoke = sub.add_parser("revoke", help="revoke a client's key")
    revoke.add_argument("name", help="the client's name")
    revoke.set_defaults(handler=cmd_revoke)


def cmd_create(args: argparse.Namespace, settings: Settings) -> int:
    """Create a client; print its key (stored only as a hash) and its webhook secret (stored,
    to sign webhooks), both shown this once."""
    from agent_runtime.clock import SystemClock
    from bot.api.exceptions import KeyNameTaken
    from bot.api.keys import create_key

    try:
        new = create_key(_store(settings), args.name, SystemClock().now())
    except KeyNameTaken as exc:
        raise UsageError(str(exc)) from None
    emit(
        args,
        {"name": new.name, "key": new.key, "webhook_secret": new.webhook_secret},
        f"client:         {new.name}\nkey:            {new.key}\n"
        f"webhook secret: {new.webhook_secret}\n"
        "Keep both now: Signoff stores only the key's hash and cannot show them again.",
    )
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    """List the clients."""
    keys = _store(settings).keys()
    emit(
        args, [key_json(k) for k in keys], "\n".join(key_line(k) for k in keys) or "no API clients"
    )
    return 0


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> int:
    """Revoke a client's key: its requests get 401 from now on."""
    from agent_runtime.clock import SystemClock

    if not _store(settings).revoke(args.name, SystemClock().now()):
        raise UsageError(f"no live API key named {args.name!r}")
    print(f"revoked {args.name}")
    return 0


def key_json(key: ApiKey) -> dict[str, Any]:
    """The stable JSON of a client (without its key)."""
    return {
        "name": key.name,
        "created_at": key.created_at.isoformat(),
        "revoked_at": None if key.revoked_at is None else key.revoked_at.isoformat(),
    }


def key_line(key: ApiKey) -> str:
    """One line for a person."""
    state = "live" if key.revoked_at is None else f"revoked {key.revoked_at:%Y-%m-%d %H:%M}"
    return f"{key.name}  created {key.created_at:%Y-%m-%d %H:%M}  {state}"


def _store(settings: Settings) -> SqlApiStore:
    import store

    return store.open(settings.database_url).api
