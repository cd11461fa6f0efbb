"""What an outsider can learn or do, and what malformed modal submissions get.

Signed requests into the real Bolt app (over HTTP) on a fresh SQLite file, the fake Slack
Web API, the demo agent. An approval or a run is seen by its requester and its approvers
anywhere, and by others only in the channel the run was started from.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlencode

import pytest

from agent_runtime import ApprovalStatus
from bot.slack.blocks import APPROVE, EDIT, REJECT, VIEW_ARGS
from devkit.sandbox.slack_api import Message, View
from tests.integration.slack_harness import (
    APPROVER,
    OUTSIDER,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import approvals_of
from tests.integration.slack_steps import (
    acked,
    has_status,
    start_refund_run,
)

NOT_YOURS = "Sorry: there is no such approval, or it is not yours to see."


def crafted_click(
    bot: BotInstance, card: Message, user: str, action_id: str, value: str, channel: str
) -> bytes:
    """A click on ``card``'s Approve, rewritten to another button, value and channel."""
    body, _ = bot.click_body(user, APPROVE, card)
    payload: dict[str, Any] = json.loads(parse_qs(body.decode())["payload"][0])
    payload["actions"][0].update(action_id=action_id, value=value)
    payload["channel"] = {"id": channel, "name": "elsewhere"}
    payload["container"].update(channel_id=channel)
    return urlencode({"payload": json.dumps(payload)}).encode()


def test_full_arguments_are_shown_only_to_those_who_may_see_the_approval(
    world: SlackWorld, bot: BotInstance
) -> None:
    """A crafted "View full arguments" from another channel: outsider refused, approver shown."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    elsewhere = world.workspace.add_channel("elsewhere").id

    card = world.card(refund.id)
    acked(bot.post(crafted_click(bot, card, OUTSIDER, VIEW_ARGS, refund.id, elsewhere)))
    assert world.new_ephemerals(OUTSIDER, 0, drain=bot) == [NOT_YOURS]
    assert world.workspace.views() == []

    acked(bot.post(crafted_click(bot, card, APPROVER, VIEW_ARGS, refund.id, elsewhere)))
    [view] = eventually(world.workspace.views, what="the arguments modal")
    assert view.user == APPROVER


def test_outsiders_elsewhere_cannot_tell_a_run_exists(world: SlackWorld, bot: BotInstance) -> None:
    """``/agent cancel`` and Fork from another channel answer an outsider as for no run."""
    run_id = start_refund_run(world, bot)
    elsewhere = world.workspace.add_channel("elsewhere").id
    missing = "0" * 32

    for target in (run_id, missing):
        answer = acked(bot.command(f"cancel {target}", user=OUTSIDER, channel=elsewhere))
        assert answer.text == f"Sorry: no run with id {target}"
    card = world.card(approvals_of(bot, run_id)["issue_refund"].id)
    acked(bot.post(crafted_click(bot, card, OUTSIDER, "run.fork", f"{run_id}:1", elsewhere)))
    assert world.new_ephemerals(OUTSIDER, 0, drain=bot) == [f"Sorry: no run with id {run_id}"]
    assert len(bot.services.runtime.runs()) == 1


def test_a_failed_modal_open_is_told_to_the_clicker(world: SlackWorld, bot: BotInstance) -> None:
    """Slack refusing ``views.open`` (an expired trigger) after the ack: the clicker is told."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    world.workspace.fail("views.open", "expired_trigger_id")
    acked(bot.click(APPROVER, REJECT, world.card(refund.id)))
    [told] = world.new_ephemerals(APPROVER, 0, drain=bot)
    assert "expired_trigger_id" in told
    assert "Click the button again" in told
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)


def submitted(bot: BotInstance, view: View, metadata: Any, value: str) -> dict[str, Any]:
    """Submit ``view`` with ``private_metadata`` replaced (or removed, for ``...``)."""
    body = bot.submit_body(APPROVER, view, value)
    payload = json.loads(parse_qs(body.decode())["payload"][0])
    if metadata is ...:
        del payload["view"]["private_metadata"]
    else:
        payload["view"]["private_metadata"] = metadata
    answer = bot.post(urlencode({"payload": json.dumps(payload)}).encode())
    assert answer.status == 200, (answer.status, answer.body)
    return answer.json()


METADATA = [
    "",
    "x",
    "f" * 24,
    "F" * 24,
    "null",
    "{}",
    "[]",
    "../../etc/passwd",
    " " * 3,
    "é" * 24,
    "0" * 3000,
    None,
    42,
    ...,
]
"""What a modal's ``private_metadata`` may be made to say: nothing naming an approval."""


@pytest.mark.parametrize("callback", ["reject", "edit"])
def test_submissions_naming_no_approval_get_a_modal_error(
    world: SlackWorld, bot: BotInstance, callback: str
) -> None:
    """Every private_metadata that names no approval is answered in the modal, never a 500."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    acked(bot.click(APPROVER, REJECT if callback == "reject" else EDIT, world.card(refund.id)))
    view = world.modal(f"approval.{callback}_submit", refund.id)
    value = "no" if callback == "reject" else json.dumps(refund.args)
    block = "reason" if callback == "reject" else "args"
    assert len(METADATA) == 14
    for metadata in METADATA:
        answer = submitted(bot, view, metadata, value)
        assert answer == {
            "response_action": "errors",
            "errors": {block: "There is no such approval."},
        }, metadata
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)


def test_deeply_nested_edited_arguments_get_a_modal_error(
    world: SlackWorld, bot: BotInstance
) -> None:
    """An edit nesting 1,500 levels deep is refused in the modal; nothing is decided."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    acked(bot.click(APPROVER, EDIT, world.card(refund.id)))
    view = world.modal("approval.edit_submit", refund.id)
    nested = '{"order_id": ' + "[" * 1500 + "]" * 1500 + ', "amount_cents": 1}'
    answer = acked(bot.submit(APPROVER, view, nested)).json()
    assert answer == {
        "response_action": "errors",
        "errors": {"args": "The arguments nest deeper than 32 levels."},
    }
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)
