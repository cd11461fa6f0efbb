"""The approvals API as ``signoff serve`` answers it, next to ``/slack/events``: a client
asks, the card appears in Slack, a person approves, the client and its webhook hear of it."""

from __future__ import annotations

import json

import pytest

from agent_runtime import ApprovalStatus
from bot.api.webhook_signature import SIGNATURE, TIMESTAMP, verify
from bot.app.serving import ServingThread
from bot.client import Approved, SignoffClient
from tests.integration import cli_ok
from tests.integration.api_server import Waiting
from tests.integration.serve_cluster import Cluster
from tests.integration.slack_harness import (
    APPROVER,
)
from tests.integration.slack_readers import is_card_of
from tests.integration.webhook_receiver import LOOPBACK, Receiver

pytestmark = pytest.mark.postgres


def test_an_api_approval_goes_through_slack_and_back(cluster: Cluster) -> None:
    """Through ``signoff serve``: an API request naming a channel gets a card there; the
    CLI's approval reaches the waiting client with the approved arguments, and serve's
    webhook sender posts the decision once, signed with the client's webhook secret."""
    cluster.env["SIGNOFF_WEBHOOK_ALLOWED_NETWORKS"] = LOOPBACK
    [front] = cluster.start("a")
    made = json.loads(cli_ok(cluster.env, "api-key", "create", "--name", "ci", "--json"))
    client = SignoffClient(f"http://127.0.0.1:{front.port}", made["key"])
    receiver = Receiver(failures=0)
    with ServingThread(receiver, "receiver"):
        hook = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
        waiting = Waiting(
            lambda: client.require_approval(
                "refund",
                {"amount": 7},
                policy={"approvers": [APPROVER]},
                channel=cluster.world.channel,
                callback_url=hook,
            )
        )
        approval = cluster.wait(
            lambda: next(
                iter(cluster.reader.approvals.store.list_approvals(status=ApprovalStatus.PENDING)),
                None,
            ),
            what="the API's approval",
        )
        cluster.wait(lambda: _has_card(cluster, approval.id), what="the card in Slack")
        cli_ok(cluster.env, "approve", approval.id, "--as", APPROVER)
        approved = waiting.result()
        assert isinstance(approved, Approved)
        assert approved.arguments == {"amount": 7}
        [(_, headers, body)] = cluster.wait(lambda: receiver.answered(200), what="the webhook")
    assert verify(made["webhook_secret"], headers[TIMESTAMP], body, headers[SIGNATURE])
    assert json.loads(body)["status"] == "approved"


def _has_card(cluster: Cluster, approval_id: str) -> bool:
    """Tell whether the approval's card is in the channel's threads yet."""
    slack, channel = cluster.world.workspace, cluster.world.channel
    return any(
        is_card_of(m, approval_id)
        for root in slack.messages(channel)
        for m in [root, *slack.messages(channel, thread_ts=root.ts)]
    )
