"""``signoff slack rekey``: every workspace's stored tokens rewritten under the newest key."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from bot.cli.common import Parser, emit, json_flag

if TYPE_CHECKING:
    from bot.app.settings import Settings

KEYS = "SIGNOFF_TOKEN_ENCRYPTION_KEY"


def add_commands(commands: Any) -> None:
    """Add ``signoff slack`` and its subcommand ``rekey``."""
    slack = commands.add_parser("slack", help="the Slack app's installations (OAuth mode)")
    sub = slack.add_subparsers(dest="slack_command", required=True, parser_class=Parser)
    rekey = sub.add_parser(
        "rekey", help=f"rewrite every workspace's stored tokens under the first key of {KEYS}"
    )
    json_flag(rekey).set_defaults(handler=cmd_rekey)


def cmd_rekey(args: argparse.Namespace, settings: Settings) -> int:
    """Rewrite, in one transaction, each installation whose tokens are not all under the
    newest key; say how many were, and that the older keys may go."""
    import store
    from agent_runtime.clock import SystemClock
    from agent_runtime.exceptions import InvalidConfiguration
    from bot.slack.installations import SignoffInstallationStore
    from bot.slack.token_cipher import TokenCipher, TokenUnreadable

    if not settings.is_oauth:
        raise InvalidConfiguration(
            "signoff slack rekey needs SIGNOFF_SLACK_MODE=oauth: only then are workspaces' "
            f"tokens stored (encrypted with {KEYS})"
        )
    stores = store.open(settings.database_url)
    cipher = TokenCipher(settings.token_keys)
    try:
        rewritten, of = SignoffInstallationStore(
            stores.installations, SystemClock(), cipher
        ).rekey()
    except TokenUnreadable as exc:
        raise InvalidConfiguration(f"{exc} (nothing was rewritten)") from None
    finally:
        stores.close()
    older = len(settings.token_keys) - 1
    emit(
        args,
        {"rewritten": rewritten, "installations": of, "older_keys": older},
        _said(rewritten, of, older),
    )
    return 0


def _said(rewritten: int, of: int, older: int) -> str:
    """What ``rekey`` tells a person."""
    done = f"rewrote {rewritten} of {of} installations under the first key of {KEYS}"
    if not older:
        return f"{done}; it is the only key listed"
    return (
        f"{done}; every stored token now opens with it alone, so the {older} older key(s) may "
        "be removed from the list (on every instance, once each runs with this key first)"
    )
