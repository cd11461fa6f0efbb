"""The "Why?" button of a card in Slack: a modal with the model step that proposed the call."""

from __future__ import annotations

import json

from agent_runtime import ApprovalStatus
from bot.slack.blocks import WHY
from devkit.sandbox.slack_api import View
from tests.integration.slack_harness import (
    APPROVER,
    TASK,
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


def why_views(world: SlackWorld) -> list[View]:
    """The Why? modals opened so far."""
    return [v for v in world.workspace.views() if v.view["title"]["text"] == "Why this call?"]


def test_why_opens_the_proposing_model_step_with_tool_results_marked_untrusted(
    world: SlackWorld, bot: BotInstance
) -> None:
    """Why? opens a modal naming the model step, the task and the order it read, as untrusted."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    audit_before = len(bot.services.approvals.store.audit_log()[0])

    acked(bot.click(APPROVER, WHY, world.card(refund.id)))
    [view] = eventually(lambda: why_views(world), between=bot.drain, what="the Why? modal")

    assert view.user == APPROVER
    text = json.dumps(view.view["blocks"], ensure_ascii=False)
    journal = bot.services.runtime.journal(run_id)
    model_steps = [s.position for s in journal if s.name == "model"]
    assert f"at step {model_steps[-1]} of run `{run_id}`" in text
    assert "`issue_refund`" in text
    assert "⚠️ *Untrusted* · the task" in text
    assert json.dumps(TASK)[1:-1] in text
    assert "⚠️ *Untrusted* · what `lookup_order`" in text
    assert "Dana Example" in text, "the order the model read is shown"
    assert has_status(bot, refund.id, ApprovalStatus.PENDING)
    assert len(bot.services.approvals.store.audit_log()[0]) == audit_before
