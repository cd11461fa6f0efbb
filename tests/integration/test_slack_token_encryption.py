"""Workspaces' tokens are encrypted at rest with ``SIGNOFF_TOKEN_ENCRYPTION_KEY``.

Installs go through the real OAuth flow against the local Slack; the rows are then read
back raw from SQLite and PostgreSQL, as anyone with a copy of the database would.
"""

from __future__ import annotations

import json

from cryptography.fernet import Fernet

from bot.slack.token_cipher import PREFIX, TokenCipher, TokenUnreadable
from tests.integration import run_cli, signoff_env
from tests.integration.slack_harness import TASK, BotInstance
from tests.integration.slack_readers import approvals_of, raw_installations, run_id_of
from tests.integration.slack_steps import acked
from tests.integration.workspaces_world import (
    TOKEN_KEY,
    TwoWorkspaces,
    install,
)

TOKEN_SHAPES = ("xoxb-", "xoxe.xoxb-", "xoxe-1-")
"""How the bot tokens and refresh tokens the local Slack issues begin."""


def _raw_rows(bot: BotInstance) -> dict[str, str]:
    """Each installation's row as stored, by team id: the JSON text itself."""
    return raw_installations(bot.services.store.engine)


def _opens_with(key: str, raw: str) -> bool:
    """Whether ``key`` alone decrypts the bot token in the raw row ``raw``."""
    try:
        TokenCipher([key]).open(json.loads(raw))
    except TokenUnreadable:
        return False
    return True


def test_no_token_is_stored_in_clear_and_the_app_still_uses_them(two: TwoWorkspaces) -> None:
    """The raw rows hold no bot or refresh token, only ``fernet:`` values; a command from
    each workspace is answered and its card posted with that workspace's token."""
    bot = two.instances[0]
    rows = _raw_rows(bot)

    assert set(rows) == {two.workspace.team_id, two.beta.team_id}
    for raw in rows.values():
        assert not any(shape in raw for shape in TOKEN_SHAPES), raw
        assert json.loads(raw)["bot_token"].startswith(PREFIX)
    assert json.loads(rows[two.beta.team_id])["bot_refresh_token"].startswith(PREFIX)
    for workspace in (two.workspace, two.beta):
        run_id = run_id_of(acked(bot.command(TASK, workspace=workspace)))
        bot.work()
        bot.drain()
        refund = approvals_of(bot, run_id)["issue_refund"]
        assert two.card_in(workspace, refund.id) is not None


def test_a_new_key_first_reads_old_rows_and_rewrites_a_row_when_saved(
    two: TwoWorkspaces,
) -> None:
    """With a new key put before the old one, beta's row (written under the old key) is still
    used; alpha, installed again, is saved under the new key alone."""
    new_key = Fernet.generate_key().decode()
    two.extra["SIGNOFF_TOKEN_ENCRYPTION_KEY"] = f"{new_key},{TOKEN_KEY}"
    two.oauth.add(two.workspace, code="alpha-again")
    bot = two.instance(migrate=False)

    assert install(bot, "alpha-again").status_code == 200
    run_id = run_id_of(acked(bot.command(TASK, workspace=two.beta)))
    bot.work()
    bot.drain()

    assert two.card_in(two.beta, approvals_of(bot, run_id)["issue_refund"].id) is not None
    rows = _raw_rows(bot)
    assert _opens_with(new_key, rows[two.workspace.team_id])
    assert not _opens_with(new_key, rows[two.beta.team_id])
    assert _opens_with(TOKEN_KEY, rows[two.beta.team_id])


def test_a_wrong_key_fails_clearly(two: TwoWorkspaces) -> None:
    """With a key the rows were not written with, ``signoff doctor`` fails the installations
    check saying which variable's keys cannot decrypt them."""
    wrong = Fernet.generate_key().decode()
    env = signoff_env(
        two.database_url,
        extra={**two.environment(), "SIGNOFF_TOKEN_ENCRYPTION_KEY": wrong},
    )

    done = run_cli(env, "doctor")

    assert done.returncode == 1
    assert (
        "FAIL  installations: unreadable: a stored Slack bot_token cannot be decrypted with "
        "any key of SIGNOFF_TOKEN_ENCRYPTION_KEY"
    ) in done.stdout
    assert wrong not in done.stdout + done.stderr
