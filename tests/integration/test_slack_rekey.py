"""``signoff slack rekey`` rewrites every workspace's stored tokens under the newest key of
``SIGNOFF_TOKEN_ENCRYPTION_KEY``, on SQLite and PostgreSQL, so the older keys can be dropped.

Rows are written as the app writes them (encrypted under an older key, or kept in clear as
before encryption) and read back raw, as anyone with a copy of the database would.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import pytest
from cryptography.fernet import Fernet
from slack_sdk.oauth.installation_store import Installation

from agent_runtime import SystemClock
from bot.cli.main import main
from bot.slack.installations import SignoffInstallationStore
from bot.slack.token_cipher import PREFIX, TokenCipher, TokenUnreadable
from store import SqlStore
from store.slack_installations import SqlInstallations
from tests.integration import run_cli, signoff_env
from tests.integration.slack_readers import raw_installations
from tests.integration.workspaces_world import (
    CLIENT_ID,
    CLIENT_SECRET,
    TOKEN_KEY,
    TwoWorkspaces,
)

OLD, NEW, LOST = (Fernet.generate_key().decode() for _ in range(3))
"""The key the rows were written with, the one put first, and one no longer listed."""
TEAMS = ("T0ALPHA", "T0BETA")
REKEY = ("slack", "rekey")


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> SqlStore:
    """An empty migrated database, SQLite then PostgreSQL, with two workspaces' tokens
    stored under ``OLD``."""
    found: SqlStore = request.getfixturevalue(
        "sqlite_store" if request.param == "sqlite" else "pg_store"
    )
    for team in TEAMS:
        _store(found, OLD).save(_installation(team))
    return found


def _store(database: SqlStore, *keys: str) -> SignoffInstallationStore:
    return SignoffInstallationStore(
        SqlInstallations(database.engine), SystemClock(), TokenCipher(keys)
    )


def _installation(team: str) -> Installation:
    """A workspace's installation with a rotating bot token and its refresh token."""
    return Installation(
        app_id="A0SIGNOFF",
        team_id=team,
        user_id="U_ADMIN",
        bot_token=f"xoxb-secret-of-{team}",
        bot_refresh_token=f"xoxe-1-secret-of-{team}",
        bot_token_expires_in=43_200,
        bot_id="B0SIGNOFF",
        bot_user_id="U0SIGNOFF",
        bot_scopes="chat:write,commands",
    )


def _signoff(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    environment: Mapping[str, str],
    *args: str,
) -> tuple[int, str, str]:
    """Run ``signoff <args>`` in this process with only ``environment`` set of Signoff's
    variables; return its exit status, stdout and stderr."""
    for name in list(os.environ):
        if name.startswith(("SIGNOFF_", "SLACK_")):
            monkeypatch.delenv(name)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def _oauth(database: SqlStore, keys: str) -> dict[str, str]:
    """The variables of OAuth mode over ``database`` with the keys ``keys``."""
    return {
        "SIGNOFF_DATABASE_URL": database.engine.url.render_as_string(hide_password=False),
        "SIGNOFF_SLACK_MODE": "oauth",
        "SLACK_CLIENT_ID": CLIENT_ID,
        "SLACK_CLIENT_SECRET": CLIENT_SECRET,
        "SIGNOFF_TOKEN_ENCRYPTION_KEY": keys,
    }


def _opens_with(key: str, raw: str) -> bool:
    """Whether ``key`` alone decrypts every token of the raw row ``raw`` (none in clear)."""
    data = json.loads(raw)
    if not data["bot_token"].startswith(PREFIX):
        return False
    try:
        TokenCipher([key]).open(data)
    except TokenUnreadable:
        return False
    return True


def _secret_free(*outputs: str) -> None:
    """Require that no key and no token appears in the outputs."""
    said = "".join(outputs)
    for secret in (OLD, NEW, LOST, TOKEN_KEY, "xoxb-", "xoxe"):
        assert secret not in said


def test_a_second_run_rewrites_nothing(
    database: SqlStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run again, ``rekey --json`` finds every row under the newest key and leaves the rows
    exactly as they were."""
    environment = _oauth(database, f"{NEW},{OLD}")
    first = _signoff(monkeypatch, capsys, environment, *REKEY, "--json")
    rows = raw_installations(database.engine)

    again = _signoff(monkeypatch, capsys, environment, *REKEY, "--json")

    assert first[0] == again[0] == 0
    assert json.loads(first[1]) == {"rewritten": 2, "installations": 2, "older_keys": 1}
    assert json.loads(again[1]) == {"rewritten": 0, "installations": 2, "older_keys": 1}
    assert raw_installations(database.engine) == rows
    _secret_free(*first[1:], *again[1:])


def test_a_token_kept_in_clear_is_encrypted(
    database: SqlStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row written before encryption (its tokens in clear) is rewritten encrypted even with
    a single key listed; the rows already under that key are left as they were."""
    rows = SqlInstallations(database.engine)
    beta = rows.find("", "T0BETA")
    assert beta is not None
    plain = TokenCipher([OLD]).open(beta) | {"team_id": "T0PLAIN"}
    rows.save("", "T0PLAIN", plain, SystemClock().now())
    before = raw_installations(database.engine)

    status, out, err = _signoff(monkeypatch, capsys, _oauth(database, OLD), *REKEY)

    assert (status, err) == (0, "")
    assert out.startswith("rewrote 1 of 3 installations under the first key")
    assert "it is the only key listed" in out
    after = raw_installations(database.engine)
    assert all(_opens_with(OLD, raw) for raw in after.values())
    assert {t: after[t] for t in TEAMS} == {t: before[t] for t in TEAMS}
    _secret_free(out, err)


def test_a_row_no_key_reads_fails_the_command_and_changes_nothing(
    database: SqlStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row under a key no longer listed makes ``rekey`` exit 2 with one line naming the
    variable and the workspace, and no row is rewritten (the readable ones neither)."""
    _store(database, LOST).save(_installation("T0LOST"))
    before = raw_installations(database.engine)

    status, out, err = _signoff(monkeypatch, capsys, _oauth(database, f"{NEW},{OLD}"), *REKEY)

    assert (status, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith("signoff: error: a stored Slack bot_token of workspace T0LOST ")
    assert "SIGNOFF_TOKEN_ENCRYPTION_KEY" in err
    assert "nothing was rewritten" in err
    assert raw_installations(database.engine) == before
    _secret_free(out, err)


def test_single_workspace_mode_is_refused(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without OAuth mode there are no stored tokens: ``rekey`` exits 2 with one line naming
    ``SIGNOFF_SLACK_MODE``."""
    environment = {"SIGNOFF_DATABASE_URL": sqlite_url, "SLACK_BOT_TOKEN": "xoxb-single"}

    status, out, err = _signoff(monkeypatch, capsys, environment, *REKEY)

    assert (status, out) == (2, "")
    assert err.count("\n") == 1
    assert "signoff slack rekey needs SIGNOFF_SLACK_MODE=oauth" in err
    _secret_free(out, err)


def test_a_new_database_is_migrated_and_has_nothing_to_rewrite(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a database no command has used yet, ``rekey`` brings its schema up to date, as
    every command does, and rewrites nothing."""
    environment = {
        "SIGNOFF_DATABASE_URL": sqlite_url,
        "SIGNOFF_SLACK_MODE": "oauth",
        "SLACK_CLIENT_ID": CLIENT_ID,
        "SLACK_CLIENT_SECRET": CLIENT_SECRET,
        "SIGNOFF_TOKEN_ENCRYPTION_KEY": NEW,
    }

    status, out, err = _signoff(monkeypatch, capsys, environment, *REKEY, "--json")

    assert (status, err) == (0, "")
    assert json.loads(out) == {"rewritten": 0, "installations": 0, "older_keys": 0}


def test_after_rekey_the_new_key_alone_reads_every_row_and_doctor_passes(
    two: TwoWorkspaces, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``signoff slack rekey`` (a process) with a new key first rewrites both installed
    workspaces under it, says the older key may go, and ``signoff doctor`` with the new key
    alone finds every workspace's token good."""
    env = signoff_env(two.database_url, extra=two.environment())
    env["SIGNOFF_TOKEN_ENCRYPTION_KEY"] = f"{NEW},{TOKEN_KEY}"

    done = run_cli(env, *REKEY)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("rewrote 2 of 2 installations under the first key")
    assert "so the 1 older key(s) may be removed" in done.stdout
    rows = raw_installations(two.instances[0].services.store.engine)
    assert all(_opens_with(NEW, raw) and not _opens_with(TOKEN_KEY, raw) for raw in rows.values())
    _secret_free(done.stdout, done.stderr)
    alone = {**two.environment(), "SIGNOFF_TOKEN_ENCRYPTION_KEY": NEW}
    status, out, err = _signoff(monkeypatch, capsys, alone, "doctor")
    assert status == 0, out + err
    assert f"ok    workspace {two.beta.team_id}" in out
