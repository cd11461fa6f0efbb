"""Acks first, through the real app: what a click or a command was acknowledged for waits
while the process is still answering another Slack request, and is carried out after it."""

from __future__ import annotations

import pytest

from agent_runtime import ApprovalStatus, RunNotFound
from bot.slack.blocks import APPROVE
from tests.integration.slack_harness import (
    APPROVER,
    TASK,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import approvals_of, run_id_of
from tests.integration.slack_steps import acked, has_status, start_refund_run

PATIENT_S = 60.0
"""A bound on the wait no test reaches: the work waits for the request, not for the bound."""


def test_a_click_is_decided_once_the_request_in_flight_is_answered(
    world: SlackWorld, bot: BotInstance
) -> None:
    """While another request is being answered, an Approve click is acknowledged at once
    and its decision waits; once that request is answered, the click is decided."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    bot.acks.longest_wait = PATIENT_S
    with bot.acks.answering():
        acked(bot.click(APPROVER, APPROVE, world.card(refund.id)))
        eventually(lambda: bot.acks.waiting == 1, what="the decision to wait its turn")
        assert has_status(bot, refund.id, ApprovalStatus.PENDING)
    assert bot.decision(refund.id).status == ApprovalStatus.APPROVED


def test_a_commands_run_is_created_once_the_request_in_flight_is_answered(
    world: SlackWorld, bot: BotInstance
) -> None:
    """While another request is being answered, ``/agent <task>`` is acknowledged with its
    run's id and the run waits to be created; once that request is answered, it is."""
    bot.acks.longest_wait = PATIENT_S
    with bot.acks.answering():
        ack = acked(bot.post(bot.command_body(TASK), settle=False))
        eventually(lambda: bot.acks.waiting == 1, what="the run's creation to wait its turn")
        with pytest.raises(RunNotFound):
            bot.services.runtime.get(run_id_of(ack))
    bot.wait_started(ack)
    assert bot.services.runtime.get(run_id_of(ack)).input["task"] == TASK
