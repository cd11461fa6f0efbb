"""The 24-hour grant modal against predicates no honest JSON holds."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import ApprovalStatus
from bot.slack.blocks import GRANT_DAY
from bot.slack.grant_blocks import DAY_SUBMIT
from tests.integration.slack_harness import (
    APPROVER,
    BotInstance,
    SlackWorld,
)
from tests.integration.slack_readers import approvals_of
from tests.integration.slack_steps import (
    acked,
    empty_postgres,
    start_refund_run,
)

HOSTILE_PREDICATES = {
    "Infinity": '{"field": "args.amount_cents", "op": "<=", "value": Infinity}',
    "NaN": '{"field": "args.amount_cents", "op": "<=", "value": NaN}',
    "duplicate keys": '{"field": "args.amount_cents", "op": "<=", "value": 1, "value": 9e18}',
    "a lone surrogate": '{"field": "args.order_id", "op": "==", "value": "\\ud800"}',
}


@pytest.fixture(params=["sqlite_url", "pg_url"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SlackWorld]:
    """A world on each database, whose approver may also grant for 24 hours."""
    url = request.getfixturevalue(request.param)
    if request.param == "pg_url":
        empty_postgres(url)
    with SlackWorld(tmp_path, url) as made:
        settings = dataclasses.replace(made.settings(), grant_approvers=(APPROVER,))
        made.instances.append(BotInstance(made, settings, migrate=True))
        yield made


@pytest.mark.parametrize("predicate", HOSTILE_PREDICATES.values(), ids=HOSTILE_PREDICATES)
def test_a_hostile_predicate_is_refused_in_the_modal_and_grants_nothing(
    world: SlackWorld, predicate: str
) -> None:
    """NaN, Infinity, a duplicate key or a lone surrogate is refused under the predicate, as
    the edit modal refuses them; no grant is made and the call stays pending."""
    bot = world.instances[0]
    refund = approvals_of(bot, start_refund_run(world, bot))["issue_refund"]
    acked(bot.click(APPROVER, GRANT_DAY, world.card(refund.id)))
    ack = acked(bot.submit(APPROVER, world.modal(DAY_SUBMIT, refund.id), predicate))
    assert ack.json().get("response_action") == "errors", ack.body
    assert ack.json()["errors"]["predicate"].startswith("Refused: it holds"), ack.body
    assert bot.services.grants.list() == []
    assert bot.services.approvals.get(refund.id).status == ApprovalStatus.PENDING
