"""``signoff grants list|revoke``: the approvals of similar calls given from cards."""

from __future__ import annotations

import argparse
from typing import Any

from agent_runtime.grants import Grant, GrantScope, describe
from bot.app.settings import Settings
from bot.cli.common import Parser, cli_user, emit, json_flag


def add_commands(commands: Any) -> None:
    """Add ``signoff grants`` and its subcommands."""
    grants = commands.add_parser("grants", help="grants: similar calls allowed from a card")
    sub = grants.add_subparsers(dest="grants_command", required=True, parser_class=Parser)
    listing = sub.add_parser("list", help="list grants, newest first")
    listing.add_argument("--all", action="store_true", help="also revoked and expired ones")
    json_flag(listing).set_defaults(handler=cmd_list)
    revoke = sub.add_parser("revoke", help="revoke a grant at once, on every instance")
    revoke.add_argument("grant_id", help="the grant's id (see signoff grants list)")
    json_flag(revoke).set_defaults(handler=cmd_revoke)


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    """List the grants in force (every grant with ``--all``)."""
    from bot.app.wiring import build_services

    found = build_services(settings).grants.list(active=not args.all, limit=1000)
    emit(
        args,
        [grant.to_json() for grant in found],
        "\n".join(grant_line(g) for g in found) or "no grants in force",
    )
    return 0


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> int:
    """Revoke a grant as the operator at this terminal (recorded in the audit log)."""
    from bot.app.wiring import build_services

    grant = build_services(settings).grants.revoke(args.grant_id, cli_user(), operator=True)
    emit(args, grant.to_json(), f"revoked {grant.id}")
    return 0


def grant_line(grant: Grant) -> str:
    """One line for a person: id, tool, scope, predicate, who, until when, and state."""
    state = "in force"
    if grant.revoked_at is not None:
        by = "" if grant.revoked_by is None else f" by {grant.revoked_by.label}"
        state = f"revoked{by} {grant.revoked_at:%Y-%m-%d %H:%M}"
    scope = f"run {grant.run_id}" if grant.scope == GrantScope.RUN else "every run, 24 h"
    return (
        f"{grant.id}  {grant.tool}  {scope}  when {describe(grant.when)}  "
        f"by {grant.granted_by.label}  until {grant.expires_at:%Y-%m-%d %H:%M} UTC  {state}"
    )
