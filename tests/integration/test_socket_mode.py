"""``signoff serve --socket-mode`` end to end, over a real WebSocket on loopback.

The sandbox's Web API answers ``apps.connections.open`` with the URL of a local Socket Mode
endpoint (``devkit.sandbox.socket_mode``) that sends Slack's envelopes (``hello``,
``slash_commands``, ``interactive``) and reads the app's acknowledgements, so the real
``slack_sdk`` Socket Mode client inside a real ``serve`` process does the rest.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, parse_qsl

import pytest

from agent_runtime import ApprovalStatus, RunId
from bot.slack.blocks import APPROVE
from bot.slack.commands import HELP
from devkit.sandbox.socket_mode import SocketModeEndpoint, SocketModeTimeout
from tests.flows import HOLD_RUN_CREATION_ENV, held_run_creation
from tests.integration.serve_cluster import TOOLS, Cluster, ServeProcess
from tests.integration.slack_harness import (
    APPROVER,
    TASK,
)

pytestmark = pytest.mark.postgres


APP_TOKEN = "xapp-1-A0SANDBOX-1-socket-mode-test"
WORD = "payload"


@pytest.fixture
def endpoint(cluster: Cluster) -> Iterator[SocketModeEndpoint]:
    """A Socket Mode endpoint that the sandbox Slack hands out for ``APP_TOKEN``."""
    with SocketModeEndpoint() as opened:
        cluster.world.slack.api.enable_socket_mode(APP_TOKEN, opened.new_url)
        yield opened


def start_socket_serve(
    cluster: Cluster, endpoint: SocketModeEndpoint, **extra: str
) -> ServeProcess:
    """Start ``signoff serve --socket-mode`` (``extra`` in its environment) and wait until it
    has said hello."""
    env = {
        **cluster.env,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "SIGNOFF_SOCKET_PING_SECONDS": "0.5",
        **extra,
    }
    process = ServeProcess(cluster.world, "S", cluster.reader, env, "--socket-mode")
    cluster.processes.append(process)

    def connected() -> bool:
        process.assert_alive()
        return endpoint.hellos >= 1

    cluster.wait(connected, what="serve --socket-mode to connect", timeout=60)
    return process


def command(
    endpoint: SocketModeEndpoint, process: ServeProcess, text: str, **fields: str
) -> dict[str, Any]:
    """Send ``/agent text`` (some fields replaced) as a ``slash_commands`` envelope; return
    the acknowledgement's payload."""
    return endpoint.acked(endpoint.send("slash_commands", command_form(process, text, **fields)))


def command_form(process: ServeProcess, text: str, **fields: str) -> dict[str, str]:
    """``/agent text`` as a ``slash_commands`` envelope's payload (some fields replaced)."""
    return {**dict(parse_qsl(process.command_body(text).decode())), **fields}


def started(ack: dict[str, Any]) -> RunId:
    """Return the run id in a ``Started run `…``` acknowledgement."""
    found = re.search(r"Started run `([0-9a-f]{32})`", str(ack.get("text", "")))
    assert found, f"no run started: {ack!r}"
    return RunId(found.group(1))


def click_payload(cluster: Cluster, process: ServeProcess, approval_id: str) -> dict[str, Any]:
    """The payload of an ``interactive`` envelope: Approve clicked on the approval's card."""
    body, _ = process.click_body(APPROVER, APPROVE, cluster.world.card(approval_id))
    return dict(json.loads(parse_qs(body.decode())["payload"][0]))


def approve_over_socket(
    cluster: Cluster, endpoint: SocketModeEndpoint, process: ServeProcess, approval_id: str
) -> None:
    """Click Approve on the card as an ``interactive`` envelope; wait until it is decided."""
    payload = click_payload(cluster, process, approval_id)
    endpoint.acked(endpoint.send("interactive", payload, accepts_response_payload=False))
    assert process.decision(approval_id).status == ApprovalStatus.APPROVED


def test_a_command_and_approve_clicks_round_trip_over_socket_mode(
    cluster: Cluster, endpoint: SocketModeEndpoint
) -> None:
    """A task mentioning the word payload, typed in a payload-team channel, starts a run over
    Socket Mode; Approve clicks sent as envelopes are acknowledged, decided, and the run ends."""
    process = start_socket_serve(cluster, endpoint)
    task = f"{TASK}; the webhook {WORD} was wrong"
    ack = command(
        endpoint,
        process,
        task,
        channel_name=f"{WORD}-team",
        user_name=f"{WORD}-fan",
        team_domain=f"{WORD}-inc",
    )
    run_id = started(ack)
    assert cluster.reader.runtime.get(run_id).input["task"] == task
    for tool in TOOLS:  # the refund's card, then the email's, asked once the refund is done
        approval = cluster.waiting_with_cards(run_id, TOOLS[: TOOLS.index(tool) + 1])[tool]
        approve_over_socket(cluster, endpoint, process, approval.id)
    cluster.completed(run_id)
    process.assert_alive()


def test_a_dropped_socket_reconnects_and_serves_the_next_command(
    cluster: Cluster, endpoint: SocketModeEndpoint
) -> None:
    """After the WebSocket drops, the app opens a new URL and answers over the new socket."""
    process = start_socket_serve(cluster, endpoint)
    assert command(endpoint, process, "help")["text"] == HELP
    assert endpoint.drop() == 1
    endpoint.wait_connected(hellos=2, timeout=30)
    assert command(endpoint, process, "help")["text"] == HELP
    assert len(cluster.world.workspace.calls("apps.connections.open")) == 2
    process.assert_alive()


def test_a_stopped_socket_mode_serve_finishes_the_envelope_in_hand_and_takes_no_other(
    cluster: Cluster, endpoint: SocketModeEndpoint, tmp_path: Path
) -> None:
    """SIGTERM while a command is being handled: that command is still acknowledged with its
    run, a click sent after the SIGTERM is left unacknowledged, so its sender sees it fail
    (never acknowledged and then dropped), and the process exits 0 with the socket closed."""
    hold = tmp_path / "hold-run-creation"
    extra = {HOLD_RUN_CREATION_ENV: str(hold), "SIGNOFF_DRAIN_SECONDS": "60"}
    process = start_socket_serve(cluster, endpoint, **extra)
    first = started(command(endpoint, process, TASK))
    refund = cluster.waiting_with_cards(first, TOOLS[:1])["issue_refund"]
    hold.touch()
    held = endpoint.send("slash_commands", command_form(process, TASK))
    cluster.wait(held_run_creation(hold).exists, what="the second run's creation held")
    process.process.send_signal(signal.SIGTERM)
    cluster.wait(lambda: "taking no more Socket Mode envelopes" in process.output(), what="stop")
    payload = click_payload(cluster, process, refund.id)
    click = endpoint.send("interactive", payload, accepts_response_payload=False)
    hold.unlink()
    assert process.process.wait(timeout=90) == 0, process.output()
    second = started(endpoint.acked(held))
    assert cluster.reader.runtime.get(second).input["task"] == TASK
    assert endpoint.open_connections == 0
    with pytest.raises(SocketModeTimeout):
        endpoint.acked(click, timeout=0)
    assert cluster.reader.approvals.get(refund.id).status == ApprovalStatus.PENDING
