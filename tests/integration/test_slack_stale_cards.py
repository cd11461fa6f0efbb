"""A decision counts only for the arguments the person was shown.

Two Signoff instances on PostgreSQL behind one fake Slack; the demo agent's actions need
two of two approvers. Clicks are signed requests to the real Bolt app; the cards, DMs and
ephemeral answers are read from the fake Slack, the charges from the demo provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import ApprovalStatus
from agent_runtime.approvals import args_hash
from bot.slack.blocks import APPROVE, EDIT
from devkit.sandbox.slack_api import View
from tests.integration.slack_harness import (
    APPROVER,
    SECOND_APPROVER,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import (
    approvals_of,
    block_texts,
    buttons,
    canonical_args,
    find_button,
)
from tests.integration.slack_steps import (
    acked,
    empty_postgres,
    has_status,
    start_refund_run,
)

pytestmark = pytest.mark.postgres

OTHER_ARGS = {"order_id": "1045", "amount_cents": 89900}
"""What the editing approver changes the refund to: another order, a larger amount."""


@pytest.fixture
def quorum_world(tmp_path: Path, pg_url: str) -> Iterator[SlackWorld]:
    """Two instances on PostgreSQL; every action needs both approvers."""
    empty_postgres(pg_url)
    with SlackWorld(tmp_path, pg_url, approvers=(APPROVER, SECOND_APPROVER), required=2) as built:
        built.instance()
        built.instance(migrate=False)
        yield built


def test_a_click_on_a_card_shown_before_an_edit_approves_nothing(
    quorum_world: SlackWorld,
) -> None:
    """Approve, edit by another approver, then Approve on the old card: refused, shown anew."""
    world = quorum_world
    first, second = world.instances
    run_id = start_refund_run(world, first)
    refund = approvals_of(first, run_id)["issue_refund"]
    old_card = world.card(refund.id)
    old_dm = world.card(refund.id, channel=world.dm(APPROVER)[0].channel)

    acked(first.click(APPROVER, APPROVE, old_card))
    eventually(lambda: first.services.approvals.get(refund.id).approvals, what="the first vote")
    acked(second.click(SECOND_APPROVER, EDIT, world.card(refund.id)))
    edit = world.modal("approval.edit_submit", refund.id)
    assert acked(second.submit(SECOND_APPROVER, edit, canonical_args(OTHER_ARGS))).body == ""
    edited = second.services.approvals.get(refund.id)
    assert edited.status == ApprovalStatus.PENDING
    assert [v["user_id"] for v in edited.approvals] == [SECOND_APPROVER], "the edit reset votes"

    # the first approver's Slack still shows the card as it was, in the thread and in the DM
    for stale in (old_card, old_dm):
        seen = len(world.ephemerals(APPROVER))
        acked(first.click(APPROVER, APPROVE, stale))
        [told] = world.new_ephemerals(APPROVER, seen, drain=first)
        assert told.startswith("Not recorded: the arguments changed since you were shown them")
    assert has_status(first, refund.id, ApprovalStatus.PENDING)
    shown = world.workspace.ephemerals(user=APPROVER)[-1]
    new_hash = args_hash(OTHER_ARGS)
    assert find_button(shown, APPROVE)["value"] == f"{refund.id}:{new_hash}"
    assert "Refund 899.00 GBP to Robin Test for order 1045" in json.dumps(shown.blocks)
    assert edited.preview_digest != refund.preview_digest, "the edit has its own preview"

    first.drain()
    second.drain()
    for copy in (
        world.card(refund.id),
        world.card(refund.id, channel=world.dm(APPROVER)[0].channel),
        world.card(refund.id, channel=world.dm(SECOND_APPROVER)[0].channel),
    ):
        assert (APPROVE, f"{refund.id}:{new_hash}") in buttons(copy)
        assert "Refund 899.00 GBP to Robin Test for order 1045" in block_texts(copy)
        assert "earlier approvals were reset" in block_texts(copy)

    entries, _ = first.services.approvals.store.audit_log()
    actions = [e.action for e in entries if e.approval_id == refund.id]
    assert actions == ["requested", "approve", "edit", "stale", "stale"]

    # seen anew, the same click counts: both approvers signed the arguments that run
    acked(first.click(APPROVER, APPROVE, world.card(refund.id)))
    decided = first.decision(refund.id)
    assert decided.status == ApprovalStatus.APPROVED
    assert decided.decided_args == OTHER_ARGS
    assert {v["args_hash"] for v in decided.approvals} == {new_hash}


def test_an_edit_submitted_after_another_edit_is_refused_in_the_modal(
    quorum_world: SlackWorld,
) -> None:
    """Two approvers edit from the same arguments; the second submission is refused."""
    world = quorum_world
    first, second = world.instances
    run_id = start_refund_run(world, first)
    refund = approvals_of(first, run_id)["issue_refund"]
    acked(first.click(APPROVER, EDIT, world.card(refund.id)))
    acked(second.click(SECOND_APPROVER, EDIT, world.card(refund.id)))

    def both() -> list[View]:
        views = world.workspace.views()
        return views if len(views) == 2 else []

    views = eventually(both, what="both edit modals")
    [mine] = [v for v in views if v.user == APPROVER]
    [theirs] = [v for v in views if v.user == SECOND_APPROVER]
    assert acked(first.submit(APPROVER, mine, canonical_args(OTHER_ARGS))).body == ""

    late = {"order_id": "1042", "amount_cents": 100}
    answer = acked(second.submit(SECOND_APPROVER, theirs, canonical_args(late))).json()
    assert answer["response_action"] == "errors"
    assert answer["errors"]["args"].startswith("the arguments changed since you were shown")
    now = first.services.approvals.get(refund.id)
    assert now.decided_args == OTHER_ARGS
    assert [v["user_id"] for v in now.approvals] == [APPROVER]
