"""Modals through the local Slack Web API: triggers, view hashes, the view stack and the Block
Kit limits on views."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from devkit.sandbox.slack_api import (
    RunningSlackApi,
    User,
)
from tests.integration.slack_api import FakeClock, api_error, modal, section


def test_views_open_with_a_fresh_trigger(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """views.open exchanges a trigger and answers with the view, its id and hash."""
    trigger = slack.workspace.issue_trigger(dana.id)
    view = client.views_open(
        trigger_id=trigger, view=modal(private_metadata="run-42", callback_id="approve")
    )["view"]
    assert view["id"].startswith("V")
    assert view["hash"]
    assert view["private_metadata"] == "run-42"
    [opened] = slack.workspace.views()
    assert (opened.id, opened.trigger_id, opened.user) == (view["id"], trigger, dana.id)
    assert opened.private_metadata == "run-42"


def test_views_open_refuses_reused_unknown_and_expired_triggers(
    slack: RunningSlackApi, client: WebClient, dana: User, clock: FakeClock
) -> None:
    """Reused, unknown and 3-s-old triggers are refused with Slack's own three errors."""
    used = slack.workspace.issue_trigger(dana.id)
    client.views_open(trigger_id=used, view=modal())
    stale = slack.workspace.issue_trigger(dana.id)
    clock.now += 3.5
    errors = []
    for trigger in (used, "1732900000.1.deadbeef", stale):
        with pytest.raises(SlackApiError) as exc:
            client.views_open(trigger_id=trigger, view=modal())
        errors.append(api_error(exc))
    assert errors == ["exchanged_trigger_id", "invalid_trigger_id", "expired_trigger_id"]
    assert len(slack.workspace.views()) == 1


def test_views_update_checks_the_hash(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """views.update with the current hash replaces the view; a stale hash is hash_conflict."""
    opened = client.views_open(
        trigger_id=slack.workspace.issue_trigger(dana.id), view=modal(external_id="run-42")
    )["view"]
    updated = client.views_update(
        view_id=opened["id"], hash=opened["hash"], view=modal("Approved")
    )["view"]
    assert updated["id"] == opened["id"]
    assert updated["hash"] != opened["hash"]
    with pytest.raises(SlackApiError) as conflict:
        client.views_update(view_id=opened["id"], hash=opened["hash"], view=modal("Again"))
    by_external = client.views_update(external_id="run-42", view=modal("By external id"))
    with pytest.raises(SlackApiError) as missing:
        client.views_update(view_id="V0NOPE", view=modal())
    assert api_error(conflict) == "hash_conflict"
    assert api_error(missing) == "not_found"
    stored = slack.workspace.view(opened["id"])
    assert stored is not None
    assert stored.view["title"]["text"] == "By external id"
    assert by_external["view"]["hash"] == stored.hash
    assert [u["title"]["text"] for u in stored.updates] == ["Approved", "By external id"]


def test_views_push_stacks_up_to_three(
    slack: RunningSlackApi, client: WebClient, dana: User
) -> None:
    """views.push stacks on the modal the trigger came from, three views at most."""
    ws = slack.workspace
    root = client.views_open(trigger_id=ws.issue_trigger(dana.id), view=modal("Root"))["view"]
    second = client.views_push(
        trigger_id=ws.issue_trigger(dana.id, view_id=root["id"]), view=modal("Second")
    )["view"]
    third = client.views_push(
        trigger_id=ws.issue_trigger(dana.id, view_id=second["id"]), view=modal("Third")
    )["view"]
    assert (second["root_view_id"], second["previous_view_id"]) == (root["id"], root["id"])
    assert third["previous_view_id"] == second["id"]
    with pytest.raises(SlackApiError) as exc:
        client.views_push(
            trigger_id=ws.issue_trigger(dana.id, view_id=third["id"]), view=modal("Fourth")
        )
    assert api_error(exc) == "push_limit_reached"
    ws.close_view(root["id"], clear=True)
    assert ws.views(open_only=True) == []


@pytest.mark.parametrize(
    ("view", "error"),
    [
        (modal(blocks=[{"type": "divider"}] * 101), "invalid_arguments"),
        (modal(private_metadata="m" * 3001), "invalid_arguments"),
        (modal("t" * 25), "invalid_arguments"),
        (
            modal(
                blocks=[
                    {
                        "type": "input",
                        "label": {"type": "plain_text", "text": "Why?"},
                        "element": {"type": "plain_text_input", "action_id": "why"},
                    }
                ]
            ),
            "invalid_arguments",
        ),
        (modal(blocks=[section("x" * 2900)] * 90), "view_too_large"),
    ],
    ids=["101-blocks", "metadata-3001", "title-25", "input-without-submit", "too-large"],
)
def test_block_kit_limits_on_modals(
    slack: RunningSlackApi, client: WebClient, dana: User, view: dict[str, Any], error: str
) -> None:
    """Invalid modals are refused without using up the trigger."""
    trigger = slack.workspace.issue_trigger(dana.id)
    with pytest.raises(SlackApiError) as exc:
        client.views_open(trigger_id=trigger, view=view)
    assert api_error(exc) == error
    assert client.views_open(trigger_id=trigger, view=modal())["ok"]
