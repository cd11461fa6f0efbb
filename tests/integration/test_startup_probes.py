"""``signoff serve`` answers on its one HTTP port while it waits for its database at start.

The probes say it is alive and starting (``/healthz`` 200) but not ready (``/readyz`` 503,
naming the database); ``/metrics`` says it is starting; a signed slash command is told to try
again in a moment and leaves nothing behind, a click is told so through its ``response_url``,
a request whose signature does not verify gets 401. Once the database (a real PostgreSQL
server of the test's own, started mid-test) answers, the same process on the same port is
ready and a command starts a run.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from sqlalchemy import func, select

from bot.app.processes import stop_process
from bot.app.starting import STARTING_TEXT
from devkit.sandbox.payloads import Origin, slash_command_form
from devkit.sandbox.slack_api import DEFAULT_TOKEN
from store import build_engine, models
from tests.integration import bound_port, signoff_command, signoff_env, wait_until
from tests.integration.ops_probes import metrics, probe, sample
from tests.integration.private_postgres import PrivatePostgres
from tests.integration.response_urls import ResponseUrls
from tests.integration.slack_harness import (
    APPROVER,
    FORM,
    REQUESTER,
    SIGNING_SECRET,
    TASK,
    UNPACED,
    SlackWorld,
    sign,
)
from tests.integration.test_startup_database_wait import ready

pytestmark = pytest.mark.postgres

TIMEOUT_S = 60.0
PASSWORD = "pg-probe-secret"


class Serve:
    """A ``signoff serve`` subprocess on ``port``, reached as Slack and a prober reach it."""

    def __init__(self, world: SlackWorld, server: PrivatePostgres) -> None:
        self.world = world
        url = server.url.replace("postgres@", f"postgres:{PASSWORD}@", 1)
        self.env = signoff_env(
            url,
            extra={
                "SIGNOFF_STARTUP_DB_WAIT_SECONDS": str(TIMEOUT_S),
                "SIGNOFF_APPROVERS": APPROVER,
                "SIGNOFF_DEMO_PROVIDER_URL": world.provider.url,
                "SIGNOFF_SLACK_API_URL": world.slack.api_url,
                "SLACK_BOT_TOKEN": DEFAULT_TOKEN,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SIGNOFF_PORT": "0",
                **UNPACED,
            },
        )
        self.log = world.tmp_path / "serve.log"
        with self.log.open("w", encoding="utf-8") as log:
            self.process = subprocess.Popen(
                [*signoff_command(), "serve"],
                env=self.env,
                cwd=world.tmp_path,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._http = requests.Session()
        self._http.trust_env = False
        self.port = bound_port(self.log, "/slack/events", timeout=TIMEOUT_S, alive=self.alive)

    def output(self) -> str:
        """Return what the process has logged so far."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def alive(self) -> bool:
        """Fail with the process's log if it has exited; else True."""
        assert self.process.poll() is None, self.output()
        return True

    def wait(self, check: Callable[[], Any], what: str) -> Any:
        """Wait until ``check`` is truthy while the process lives; return its value."""
        return wait_until(lambda: self.alive() and check(), timeout=TIMEOUT_S, what=what)

    def post(self, body: bytes, *, secret: str = SIGNING_SECRET) -> requests.Response:
        """POST ``body`` to ``/slack/events`` signed with ``secret`` as Slack signs it."""
        stamp = str(int(time.time()))
        headers = {
            "Content-Type": FORM,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": sign(secret, stamp, body),
        }
        url = f"http://127.0.0.1:{self.port}/slack/events"
        return self._http.post(url, data=body, headers=headers, timeout=10.0)

    def command(self, text: str, *, secret: str = SIGNING_SECRET) -> requests.Response:
        """Type ``/agent text`` as the requester in the world's channel (signed with
        ``secret``)."""
        ws = self.world.workspace
        user = ws.user(REQUESTER)
        assert user is not None
        form = slash_command_form(
            ws,
            Origin(user, self.world.channel),
            "/agent",
            text,
            trigger_id=ws.issue_trigger(REQUESTER),
            response_url="http://127.0.0.1:9/commands/response",
        )
        return self.post(urlencode(form).encode(), secret=secret)

    def close(self) -> None:
        """Stop the process and close the HTTP session."""
        stop_process(self.process)
        self._http.close()


@pytest.fixture
def serve(tmp_path: Path, stopped_pg: PrivatePostgres) -> Iterator[Serve]:
    """The fake Slack and provider, and ``signoff serve`` started with its database down."""
    with SlackWorld(tmp_path, stopped_pg.url, approvers=(APPROVER,)) as world:
        process = Serve(world, stopped_pg)
        try:
            yield process
        finally:
            process.close()


def starting(serve: Serve) -> dict[str, Any]:
    """Wait until ``/readyz`` reports a failed attempt to reach the database; return it."""

    def failed_once() -> dict[str, Any] | None:
        found = probe(serve.port, "/readyz")
        if found is None or "attempts failed" not in found[1]["checks"].get("startup", ""):
            return None
        return found[1]

    body: dict[str, Any] = serve.wait(failed_once, "/readyz naming a failed attempt")
    return body


def runs_in(server: PrivatePostgres) -> int:
    """Return how many runs the database holds."""
    engine = build_engine(server.url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(models.runs)).scalar_one())
    finally:
        engine.dispose()


def test_probes_answer_while_serve_waits_for_its_database_then_the_same_port_serves(
    serve: Serve, stopped_pg: PrivatePostgres
) -> None:
    """Alive and starting, not ready (naming the database, no secret), metrics say starting;
    once PostgreSQL is up the same process on the same port is ready and alive."""
    body = starting(serve)
    assert body["status"] == "fail"
    assert body["failing"] == ["database", "startup"]
    assert body["checks"]["database"] == "unreachable (OperationalError)"
    assert "giving up in" in body["checks"]["startup"]
    assert PASSWORD not in json.dumps(body)
    assert probe(serve.port, "/healthz") == (
        200,
        {"status": "starting", "failing": [], "checks": {"startup": "starting"}},
    )
    found = metrics(serve.port)
    assert sample(found, "signoff_starting") == 1
    assert (sample(found, "signoff_startup_database_failures_total") or 0) >= 1

    stopped_pg.start()
    serve.wait(lambda: ready(serve.port), "/readyz 200")
    healthz = probe(serve.port, "/healthz")
    assert healthz is not None
    assert healthz[0] == 200
    assert healthz[1]["status"] == "ok"
    assert sample(metrics(serve.port), "signoff_starting") == 0
    serve.alive()


def test_a_signed_command_while_starting_is_told_to_try_again_and_records_nothing(
    serve: Serve, stopped_pg: PrivatePostgres
) -> None:
    """While the database is down a signed ``/agent`` gets a 200 with the ephemeral "starting"
    text and an unsigned one 401; once it is up no run exists, and a command starts one."""
    starting(serve)
    answer = serve.command(TASK)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"response_type": "ephemeral", "text": STARTING_TEXT}
    forged = serve.command(TASK, secret="not-the-signing-secret")
    assert forged.status_code == 401, forged.text
    assert STARTING_TEXT not in forged.text

    stopped_pg.start()
    serve.wait(lambda: ready(serve.port), "/readyz 200")
    assert runs_in(stopped_pg) == 0
    started = serve.command(TASK)
    assert started.status_code == 200, started.text
    assert "Started run" in started.json()["text"], started.text
    serve.wait(lambda: runs_in(stopped_pg) == 1, "the command's run")


def test_a_click_while_starting_is_acked_and_told_through_its_response_url(
    serve: Serve,
) -> None:
    """A signed click gets an empty 200 at once, and its ``response_url`` the ephemeral
    "starting" text (not replacing the card)."""
    with ResponseUrls() as responses:
        starting(serve)
        payload = {
            "type": "block_actions",
            "user": {"id": APPROVER},
            "team": {"id": serve.world.workspace.team_id},
            "channel": {"id": serve.world.channel},
            "response_url": responses.url("click"),
            "actions": [{"action_id": "approve", "value": "a1", "block_id": "b"}],
        }
        answer = serve.post(urlencode({"payload": json.dumps(payload)}).encode())
        assert answer.status_code == 200, answer.text
        assert answer.text == ""
        assert serve.wait(lambda: responses.texts("click"), "the click's response") == [
            STARTING_TEXT
        ]
