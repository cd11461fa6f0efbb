"""``serve --socket-mode`` at start: an app token Slack refuses is one line and exit 2; a
Slack it cannot reach yet is waited for, as the HTTP front waits for Slack's requests."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from bot.app.processes import stop_process
from devkit.sandbox.slack_api import DEFAULT_TOKEN, Workspace, start_slack_api
from tests.integration import run_cli, signoff_command, signoff_env, wait_until
from tests.integration.serve_cluster import free_port

TIMEOUT_S = 30.0
UNREACHABLE = "Slack unreachable for Socket Mode"


def _env(tmp_path: Path, api_url: str) -> dict[str, str]:
    return signoff_env(
        f"sqlite:///{tmp_path / 'signoff.db'}",
        extra={
            "SLACK_SIGNING_SECRET": "s" * 32,
            "SLACK_BOT_TOKEN": DEFAULT_TOKEN,
            "SLACK_APP_TOKEN": "xapp-1-A0WRONG-1-not-this-app",
            "SIGNOFF_SLACK_API_URL": api_url,
        },
    )


def test_an_app_token_slack_refuses_stops_serve_in_one_line(tmp_path: Path) -> None:
    """``invalid_auth`` from ``apps.connections.open``: exit 2 naming the token, no
    traceback (it printed the SDK's ``SlackApiError`` and exited 1)."""
    slack = start_slack_api(Workspace())
    try:
        done = run_cli(_env(tmp_path, slack.api_url), "serve", "--socket-mode", "--no-worker")
    finally:
        slack.stop()
    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith("signoff: error: Slack refused SLACK_APP_TOKEN (invalid_auth)\n")
    assert "Traceback" not in done.stderr


def test_a_slack_it_cannot_reach_yet_is_tried_again_until_the_process_is_stopped(
    tmp_path: Path,
) -> None:
    """Nothing listens at Slack's URL: the process stays up, trying again with backoff and
    saying so (it exited 1 with a ``URLError`` traceback: a network blip at start meant a
    crash loop), and SIGTERM ends it cleanly."""
    env = _env(tmp_path, f"http://127.0.0.1:{free_port()}/api/")
    log_path = tmp_path / "serve.log"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [*signoff_command(), "serve", "--socket-mode", "--no-worker"],
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:

            def tried_twice() -> bool:
                assert process.poll() is None, log_path.read_text()
                return log_path.read_text().count(UNREACHABLE) >= 2

            wait_until(tried_twice, timeout=TIMEOUT_S, what="two tries to reach Slack")
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=TIMEOUT_S) == 0, log_path.read_text()
        finally:
            stop_process(process)
    assert "Traceback" not in log_path.read_text()
