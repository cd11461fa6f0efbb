"""Names Slack reports for the people who click reach Slack again only escaped.

A click's ``user.username`` is text Signoff does not choose: it is recorded as the decider's
name and read back in the refusals later clickers are shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import pytest

from agent_runtime import ApprovalStatus
from bot.slack.blocks import APPROVE
from tests.integration.slack_harness import (
    APPROVER,
    SECOND_APPROVER,
    SlackWorld,
)
from tests.integration.slack_readers import approvals_of, unescaped_markup
from tests.integration.slack_steps import (
    acked,
    has_status,
    start_refund_run,
)

HOSTILE_NAME = "<!channel> <http://evil.example|click here> <@U_EVE>"


@pytest.fixture
def two_approvers(tmp_path: Path, sqlite_url: str) -> Iterator[SlackWorld]:
    """A world whose two approvers may each decide alone."""
    with SlackWorld(tmp_path, sqlite_url, approvers=(APPROVER, SECOND_APPROVER)) as built:
        built.instance()
        yield built


def renamed(body: bytes, name: str) -> bytes:
    """Return the click ``body`` with the clicker's user name replaced by ``name``."""
    payload = json.loads(parse_qs(body.decode())["payload"][0])
    payload["user"]["username"] = payload["user"]["name"] = name
    return urlencode({"payload": json.dumps(payload)}).encode()


def test_a_deciders_name_is_escaped_in_the_refusal_a_later_clicker_sees(
    two_approvers: SlackWorld,
) -> None:
    """A decider named with Slack markup is shown escaped to whoever clicks after them."""
    world, bot = two_approvers, two_approvers.instances[0]
    refund = approvals_of(bot, start_refund_run(world, bot))["issue_refund"]
    card = world.card(refund.id)
    first, _ = bot.click_body(APPROVER, APPROVE, card)
    acked(bot.post(renamed(first, HOSTILE_NAME)))
    bot.decision(refund.id)
    assert has_status(bot, refund.id, ApprovalStatus.APPROVED)

    acked(bot.click(SECOND_APPROVER, APPROVE, card))
    [told] = world.new_ephemerals(SECOND_APPROVER, 0, drain=bot)
    assert "already approved by" in told
    assert unescaped_markup([told]) == [], told
