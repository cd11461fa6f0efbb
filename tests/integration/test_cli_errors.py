"""One error root: every user error exits 2 with one `signoff: error:` line on stderr."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agent_runtime import SignoffError, UserError
from bot.cli.main import main
from tests.integration import (
    CLI_TIMEOUT_S,
    cli_ok,
    demo_input,
    run_cli,
    signoff_command,
    signoff_env,
)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the command line at a fresh SQLite file."""
    monkeypatch.setenv("SIGNOFF_DATABASE_URL", f"sqlite:///{tmp_path / 'signoff.db'}")


@pytest.mark.usefixtures("database")
def test_a_rejection_without_a_reason_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """`reject --reason ""` exits 2 with the reason on stderr, nothing on stdout."""
    code, out, err = _run(["reject", "a1", "--as", "U_DANA", "--reason", " "], capsys)
    assert (code, out) == (2, "")
    assert err == "signoff: error: --reason must say why (the agent is told it)\n"


@pytest.mark.usefixtures("database")
def test_an_unknown_run_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A run id nobody knows exits 2 with one error line."""
    code, out, err = _run(["show", "0" * 32], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("signoff: error: no run with id")
    assert err.count("\n") == 1


def test_a_bad_setting_is_a_user_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A setting Signoff cannot use exits 2, naming the variable."""
    monkeypatch.setenv("SIGNOFF_DEMO", "maybe")
    code, _, err = _run(["runs"], capsys)
    assert code == 2
    assert err == "signoff: error: SIGNOFF_DEMO must be 1 or 0 (true or false), not 'maybe'\n"


def test_a_pooling_mode_signoff_cannot_work_behind_is_a_user_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database URL naming a pooling mode other than session or transaction exits 2,
    naming the parameter and the modes, before any connection is tried."""
    monkeypatch.setenv(
        "SIGNOFF_DATABASE_URL", "postgresql://signoff@127.0.0.1:1/signoff?pooling=statement"
    )
    code, out, err = _run(["runs"], capsys)
    assert (code, out) == (2, "")
    assert err == (
        "signoff: error: pooling='statement' in the database URL: use session or transaction\n"
    )


@pytest.mark.parametrize(
    ("url", "error"),
    [
        (
            "postgresql://signoff@127.0.0.1:1/signoff?pool_mode=transaction",
            "unknown parameter 'pool_mode' in the database URL (a pooler's mode is"
            " pooling=session or pooling=transaction)",
        ),
        (
            "postgresql://signoff@127.0.0.1:1/signoff?keepalive=1",
            "unknown parameter 'keepalive' in the database URL",
        ),
        (
            "sqlite:///signoff.db?pooling=transaction",
            "pooling= in the database URL is for PostgreSQL only",
        ),
        (
            "postgresql://signoff:s3cret@db:PORT/signoff",
            "not a database URL: postgresql://signoff:***@db:PORT/signoff",
        ),
    ],
    ids=["pooler-word", "misspelt", "sqlite", "port"],
)
def test_a_database_url_signoff_cannot_use_is_a_one_line_error_without_its_password(
    url: str, error: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database URL with a parameter libpq does not know (a pooler's own word for its
    mode, a misspelling), a pooling mode on SQLite or a port that is not a number exits 2
    with one line saying so, before any connection is tried, and never shows a password."""
    monkeypatch.setenv("SIGNOFF_DATABASE_URL", url)
    code, out, err = _run(["runs"], capsys)
    assert (code, out) == (2, "")
    assert err == f"signoff: error: {error}\n"


@pytest.mark.usefixtures("database")
def test_an_mcp_gateway_whose_gated_calls_nobody_could_approve_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mcp proxy`` with no approvers configured nor in its policy exits 2 naming the fix,
    before it starts the upstream server (which would write the file)."""
    monkeypatch.delenv("SIGNOFF_APPROVERS", raising=False)
    started = tmp_path / "upstream-started"
    upstream = ["--", "python", "-c", f"open({str(started)!r}, 'w')"]
    code, out, err = _run(["mcp", "proxy", "--name", "notes", "--as", "U_AGENT", *upstream], capsys)
    assert (code, out) == (2, "")
    assert err == (
        "signoff: error: too few people may approve the calls gated under the default (needs "
        "1, has 0) of the gateway's policy: set SIGNOFF_APPROVERS or SIGNOFF_APPROVER_GROUPS "
        "(in the environment the MCP client starts the gateway with), or approvers or groups "
        "in the --policy file\n"
    )
    assert not started.exists()


@pytest.mark.usefixtures("database")
def test_a_demo_workflow_started_without_the_demo_says_how_to_load_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``start demo.steps`` without ``SIGNOFF_DEMO=1`` names the setting; another unknown
    workflow is refused as before."""
    monkeypatch.delenv("SIGNOFF_DEMO", raising=False)
    code, out, err = _run(["start", "demo.steps"], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("signoff: error: unknown workflow 'demo.steps' (registered: ")
    assert err.endswith("); the demo.* workflows load with SIGNOFF_DEMO=1\n")
    code, _, err = _run(["start", "refunds.issue"], capsys)
    assert code == 2
    assert "SIGNOFF_DEMO" not in err


def test_an_mcp_gateway_whose_upstream_exits_at_once_says_so_in_one_line(tmp_path: Path) -> None:
    """``mcp proxy -- /bin/true``: the upstream server ends before answering; the gateway
    exits 1 with one line naming it, no traceback."""
    env = signoff_env(f"sqlite:///{tmp_path / 'signoff.db'}", extra={"SIGNOFF_APPROVERS": "U1"})
    proxy = ["mcp", "proxy", "--name", "notes", "--as", "U_AGENT", "--", "true"]
    done = run_cli(env, *proxy, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        "signoff: error: the upstream MCP server (true) did not start: Connection closed\n"
    )


@pytest.mark.parametrize(
    ("upstream", "says"),
    [
        (["--", "/nonexistent/mcp-server"], "(/nonexistent/mcp-server) could not be started: "),
        (["--upstream-url", "http://127.0.0.1:9/mcp"], "(http://127.0.0.1:9/mcp) is unreachable: "),
    ],
    ids=["no such command", "nothing listening"],
)
def test_an_mcp_gateway_whose_upstream_cannot_be_reached_says_so_in_one_line(
    tmp_path: Path, upstream: list[str], says: str
) -> None:
    """An upstream command that does not exist, or a URL nothing answers at: one line
    naming the upstream and why, exit 1 (each printed a traceback of the MCP SDK's)."""
    env = signoff_env(f"sqlite:///{tmp_path / 'signoff.db'}", extra={"SIGNOFF_APPROVERS": "U1"})
    proxy = ["mcp", "proxy", "--name", "notes", "--as", "U_AGENT", *upstream]
    done = run_cli(env, *proxy, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("signoff: error: the upstream MCP server " + says)
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_every_user_error_of_the_product_descends_from_one_root() -> None:
    """The errors people can fix share UserError, itself under SignoffError."""
    from agent_runtime import (
        AgentNotFound,
        ApprovalNotFound,
        EventAlreadyDelivered,
        InvalidConfiguration,
        InvalidInput,
        InvalidRunState,
        NotSerializable,
        RunNotFound,
        WorkflowNotFound,
    )
    from agent_runtime.budget_control import NotAllowed
    from bot.app.settings import SettingsError
    from bot.cli.common import UsageError
    from bot.slack.commands import BadCommand

    found = (
        AgentNotFound, ApprovalNotFound, EventAlreadyDelivered, InvalidConfiguration,
        InvalidInput, InvalidRunState, NotSerializable, RunNotFound, WorkflowNotFound,
        NotAllowed, SettingsError, UsageError, BadCommand,
    )  # fmt: skip
    assert all(issubclass(kind, UserError) for kind in found)
    assert issubclass(UserError, SignoffError)


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    """`signoff runs | head -1` with the reader already gone: exit 1, no traceback on stderr."""
    env = signoff_env(f"sqlite:///{tmp_path / 'signoff.db'}")
    for n in range(1, 4):
        cli_ok(env, "start", "demo.steps", "--input", json.dumps(demo_input(tmp_path / "o", n, 0)))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [*signoff_command(), "runs"],
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=CLI_TIMEOUT_S,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 1
    assert done.stderr == ""


def test_help_answers_even_when_the_settings_are_wrong(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With settings that stop every command (OAuth mode without its variables), ``--help``
    still prints the help and exits 0, and a command says what is wrong with exit 2."""
    monkeypatch.setenv("SIGNOFF_SLACK_MODE", "oauth")
    with pytest.raises(SystemExit) as helped:
        main(["slack", "--help"])
    assert helped.value.code == 0
    assert "rekey" in capsys.readouterr().out
    code, out, err = _run(["runs"], capsys)
    assert (code, out) == (2, "")
    needs = "SIGNOFF_SLACK_MODE=oauth needs SLACK_CLIENT_ID and SLACK_CLIENT_SECRET"
    assert err == f"signoff: error: {needs}\n"


@pytest.mark.parametrize("front", [[], ["--socket-mode"]], ids=["HTTP", "Socket Mode"])
def test_serve_for_one_workspace_without_its_bot_token_stops_at_start(
    tmp_path: Path, front: list[str]
) -> None:
    """Without ``SLACK_BOT_TOKEN`` (one workspace), ``serve`` exits 2 at start saying so: it
    used to take commands, then fail every message to Slack."""
    env = signoff_env(
        f"sqlite:///{tmp_path / 'signoff.db'}",
        extra={"SLACK_SIGNING_SECRET": "s" * 32, "SLACK_BOT_TOKEN": "", "SIGNOFF_PORT": "0"},
    )
    done = run_cli(env, "serve", *front)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("signoff: error: SLACK_BOT_TOKEN is not set: ")


def test_serve_with_an_anchor_file_it_cannot_write_stops_at_start(tmp_path: Path) -> None:
    """``SIGNOFF_AUDIT_ANCHOR_FILE`` in a directory that does not exist: exit 2 at start,
    naming the variable (the process ran, failing every round with a traceback, and its
    probes and doctor said all was well)."""
    anchors = tmp_path / "no such directory" / "anchors.jsonl"
    env = signoff_env(
        f"sqlite:///{tmp_path / 'signoff.db'}",
        extra={"SIGNOFF_AUDIT_ANCHOR_FILE": str(anchors), "SIGNOFF_PORT": "0"},
    )
    done = run_cli(env, "serve", "--no-http")
    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith(
        f"signoff: error: SIGNOFF_AUDIT_ANCHOR_FILE: cannot append to {anchors}: "
        "No such file or directory\n"
    )
