"""``signoff mcp proxy``: put Signoff's sign-off in front of an MCP server an agent uses."""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from agent_runtime.exceptions import UserError
from bot.app.settings import Settings, child_environment
from bot.cli.common import UsageError, positive_float, positive_int
from bot.mcp.options import MAX_CONVERSATIONS, GatewayOptions, Upstream


def add_commands(commands: Any) -> None:
    """Add ``signoff mcp`` and its subcommands to the ``signoff`` parser."""
    mcp = commands.add_parser("mcp", help="the MCP approval gateway")
    sub: Any = mcp.add_subparsers(dest="mcp_command", required=True, parser_class=type(mcp))
    proxy = sub.add_parser(
        "proxy",
        help="serve MCP on stdio in front of COMMAND, gating its tools",
        description="Run as an MCP server (stdio) in front of the MCP server COMMAND starts; "
        "calls of gated tools wait for a person's sign-off.",
    )
    proxy.add_argument("--name", required=True, help="this gateway's name (names its tools)")
    proxy.add_argument("--policy", type=Path, help="a JSON or YAML policy file")
    proxy.add_argument(
        "--as",
        dest="client",
        metavar="USER",
        help="the identity the MCP client's calls are requested as (default mcp:NAME)",
    )
    proxy.add_argument(
        "--session",
        default="default",
        help="a key naming the client's session: the same NAME, --as and "
        "--session continue the same run after a restart; a call whose _meta names a "
        "conversation (io.signoff/conversation-id, openai/session or sessionID) goes to "
        "that conversation's own run",
    )
    proxy.add_argument(
        "--channel",
        metavar="CHANNEL",
        help="a Slack channel id for the run's thread and approval cards (posted by signoff serve)",
    )
    proxy.add_argument(
        "--team",
        default="",
        metavar="TEAM",
        help="the Slack workspace (team id) of --channel, where the approvers' bare user ids "
        "count; needed with --channel when serving many workspaces (SIGNOFF_SLACK_MODE=oauth)",
    )
    proxy.add_argument(
        "--max-conversations",
        type=positive_int,
        default=MAX_CONVERSATIONS,
        metavar="N",
        help="conversations (each a run and a Slack thread) this gateway may hold; a call "
        f"naming one more is refused (default {MAX_CONVERSATIONS})",
    )
    proxy.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the upstream server (repeatable), over the ones "
        "it inherits (all but SIGNOFF_* and SLACK_*)",
    )
    proxy.add_argument(
        "--poll-interval",
        type=positive_float,
        default=0.25,
        metavar="SECONDS",
        help="how often a waiting call looks for its decision",
    )
    proxy.add_argument(
        "--upstream-url",
        metavar="URL",
        help="the upstream MCP server's Streamable HTTP endpoint, instead of a COMMAND",
    )
    proxy.add_argument(
        "upstream",
        nargs=argparse.REMAINDER,
        help="-- COMMAND [ARGS...]: the upstream MCP server (stdio)",
    )
    proxy.set_defaults(handler=cmd_proxy)


def cmd_proxy(args: argparse.Namespace, settings: Settings) -> int:
    """Serve one MCP client until it disconnects."""
    import anyio

    from agent_runtime.approvals import Actor
    from bot.app.wiring import build_services
    from bot.mcp.gateway import serve, unreachable  # the MCP SDK is slow to import
    from bot.mcp.policy import load_policy
    from bot.mcp.session_run import SessionKey

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)  # stdout speaks MCP
    # leaving on an error while the upstream server is still stopping makes asyncio warn that
    # its loop is closed; the upstream is stopped regardless, and the person should see the
    # one-line error alone
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    client = args.client or f"mcp:{args.name}"
    if args.channel and not args.team and settings.slack_mode == "oauth":
        raise UserError(
            "serving many Slack workspaces (SIGNOFF_SLACK_MODE=oauth), --channel needs --team: "
            "the id of the workspace the channel is in"
        )
    policy = load_policy(args.policy)
    short = policy.too_few_approve(settings.approvers, settings.approver_groups, client)
    if short:
        raise UserError(
            f"too few people may approve the calls gated under {' and '.join(short)} of the "
            "gateway's policy: set SIGNOFF_APPROVERS or SIGNOFF_APPROVER_GROUPS (in the "
            "environment the MCP client starts the gateway with), or approvers or groups in "
            "the --policy file"
        )
    options = GatewayOptions(
        key=SessionKey(gateway=args.name, client=client, session=args.session, team=args.team),
        upstream=_upstream(args),
        requester=Actor(user_id=client, team_id=args.team),
        policy=policy,
        poll_interval=timedelta(seconds=args.poll_interval),
        channel=args.channel,
        max_conversations=args.max_conversations,
    )
    services = build_services(settings)
    try:
        anyio.run(lambda: serve(options, services, patience=2 * settings.lease_ttl))
    except BaseExceptionGroup as group:
        raise unreachable(_sole_error(group), options.upstream) from None
    finally:
        services.shutdown()
    return 0


def _sole_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """Return the one error the gateway's task group ended with (or the group, if several)."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        error = pending.pop()
        if isinstance(error, BaseExceptionGroup):
            pending.extend(error.exceptions)
        else:
            leaves.append(error)
    return leaves[0] if len(leaves) == 1 else group


def _upstream(args: argparse.Namespace) -> Upstream:
    """Return the ``Upstream`` the command line names: a URL, or a command after ``--``."""
    command = args.upstream[1:] if args.upstream[:1] == ["--"] else args.upstream
    if bool(command) == bool(args.upstream_url):
        raise UsageError(
            "name the upstream server either after --: -- COMMAND [ARGS...], "
            "or with --upstream-url URL"
        )
    if args.upstream_url:
        return Upstream(url=args.upstream_url)
    return Upstream(command=command[0], args=tuple(command[1:]), env=_env(args.env))


def _env(pairs: list[str]) -> dict[str, str]:
    """The upstream's environment: this one's (less Signoff's settings), then ``--env``."""
    if any("=" not in p for p in pairs):
        raise UsageError("--env takes NAME=VALUE")
    return child_environment() | dict(p.split("=", 1) for p in pairs)
