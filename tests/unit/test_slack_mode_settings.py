"""The Slack mode is chosen explicitly; a mix of the two modes' variables is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from bot.app.settings import Settings, SettingsError

KEY, OLD_KEY = Fernet.generate_key().decode(), Fernet.generate_key().decode()
OAUTH = {
    "SLACK_CLIENT_ID": "1111.2222",
    "SLACK_CLIENT_SECRET": "client-secret-value",
    "SIGNOFF_TOKEN_ENCRYPTION_KEY": KEY,
}


def test_single_workspace_is_the_default() -> None:
    """With a bot token alone Signoff serves one workspace."""
    settings = Settings.from_env({"SLACK_BOT_TOKEN": "xoxb-1"})
    assert (settings.slack_mode, settings.slack_bot_token) == ("single", "xoxb-1")


def test_oauth_mode_takes_the_client_credentials() -> None:
    """``SIGNOFF_SLACK_MODE=oauth`` with the client id and secret serves many workspaces."""
    settings = Settings.from_env({"SIGNOFF_SLACK_MODE": "oauth", **OAUTH})
    assert (settings.slack_mode, settings.slack_client_id) == ("oauth", "1111.2222")
    assert {"client-secret-value", KEY} <= set(settings.secrets())
    assert "client-secret-value" not in repr(settings)
    assert KEY not in repr(settings)


def test_token_keys_are_read_newest_first_from_the_variable_or_a_file(tmp_path: Path) -> None:
    """A comma list in the variable, or one key a line in the ``_FILE``, newest first."""
    env = {"SIGNOFF_SLACK_MODE": "oauth", **OAUTH}
    listed = Settings.from_env({**env, "SIGNOFF_TOKEN_ENCRYPTION_KEY": f"{KEY}, {OLD_KEY}"})
    path = tmp_path / "keys"
    path.write_text(f"{KEY}\n{OLD_KEY}\n")
    del env["SIGNOFF_TOKEN_ENCRYPTION_KEY"]
    filed = Settings.from_env({**env, "SIGNOFF_TOKEN_ENCRYPTION_KEY_FILE": str(path)})
    assert listed.token_keys == filed.token_keys == (KEY, OLD_KEY)


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        ({}, "SIGNOFF_SLACK_MODE=oauth needs SIGNOFF_TOKEN_ENCRYPTION_KEY"),
        ({"SIGNOFF_TOKEN_ENCRYPTION_KEY": "not-a-key"}, "key 1 is not a Fernet key"),
        ({"SIGNOFF_TOKEN_ENCRYPTION_KEY": f"{KEY},short"}, "key 2 is not a Fernet key"),
    ],
    ids=["missing", "bad", "bad second"],
)
def test_oauth_mode_without_a_good_token_key_is_a_startup_error(
    keys: dict[str, str], said: str
) -> None:
    """A missing or malformed key stops the process, naming the variable, never the key."""
    env = {k: v for k, v in OAUTH.items() if k != "SIGNOFF_TOKEN_ENCRYPTION_KEY"}
    with pytest.raises(SettingsError) as refused:
        Settings.from_env({"SIGNOFF_SLACK_MODE": "oauth", **env, **keys})
    assert said in str(refused.value)
    assert "SIGNOFF_TOKEN_ENCRYPTION_KEY" in str(refused.value)
    assert "not-a-key" not in str(refused.value)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        (
            {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_CLIENT_ID": "1"},
            ("SLACK_BOT_TOKEN", "SLACK_CLIENT_ID"),
        ),
        (
            {"SIGNOFF_SLACK_MODE": "oauth", "SLACK_BOT_TOKEN": "xoxb-1", **OAUTH},
            ("SLACK_BOT_TOKEN", "SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET"),
        ),
        (OAUTH, ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "SIGNOFF_SLACK_MODE")),
        ({"SIGNOFF_SLACK_MODE": "oauth", "SLACK_CLIENT_ID": "1"}, ("SLACK_CLIENT_SECRET",)),
        ({"SIGNOFF_SLACK_MODE": "both"}, ("SIGNOFF_SLACK_MODE",)),
    ],
    ids=["token and client id", "oauth with a token", "oauth vars in single", "half oauth", "typo"],
)
def test_a_half_configured_mix_is_a_startup_error_naming_the_variables(
    env: dict[str, str], named: tuple[str, ...]
) -> None:
    """Each inconsistent combination is refused with a message naming the variables involved."""
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(env)
    assert all(name in str(refused.value) for name in named), str(refused.value)


@pytest.mark.parametrize("url", ["127.0.0.1:44475/api/", "slack.com/api", "ftp://slack.com/api/"])
def test_a_slack_api_url_that_is_no_http_url_is_a_startup_error(url: str) -> None:
    """``SIGNOFF_SLACK_API_URL`` without its scheme was taken: serve then failed every
    delivery with a traceback, and ``signoff doctor`` crashed."""
    with pytest.raises(SettingsError, match="SIGNOFF_SLACK_API_URL must be an http"):
        Settings.from_env({"SLACK_BOT_TOKEN": "xoxb-1", "SIGNOFF_SLACK_API_URL": url})
    good = Settings.from_env({"SIGNOFF_SLACK_API_URL": "http://127.0.0.1:44475/api"})
    assert good.slack_api_url == "http://127.0.0.1:44475/api/"
