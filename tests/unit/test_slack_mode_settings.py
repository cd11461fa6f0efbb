"""The Slack mode is chosen explicitly; a mix of the two modes' variables is refused."""

from __future__ import annotations

import pytest

from bot.app.settings import Settings, SettingsError

OAUTH = {"SLACK_CLIENT_ID": "1111.2222", "SLACK_CLIENT_SECRET": "client-secret-value"}


def test_single_workspace_is_the_default() -> None:
    """With a bot token alone Signoff serves one workspace."""
    settings = Settings.from_env({"SLACK_BOT_TOKEN": "xoxb-1"})
    assert (settings.slack_mode, settings.slack_bot_token) == ("single", "xoxb-1")


def test_oauth_mode_takes_the_client_credentials() -> None:
    """``SIGNOFF_SLACK_MODE=oauth`` with the client id and secret serves many workspaces."""
    settings = Settings.from_env({"SIGNOFF_SLACK_MODE": "oauth", **OAUTH})
    assert (settings.slack_mode, settings.slack_client_id) == ("oauth", "1111.2222")
    assert "client-secret-value" in settings.secrets()
    assert "client-secret-value" not in repr(settings)


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
