"""Cards of approvals a rule decided say which rule decided them."""

from __future__ import annotations

import json

from agent_runtime import ApprovalStatus
from agent_runtime.rule_decisions import rule_actor
from agent_runtime.rules import Rule, RuleAction
from bot.slack import blocks
from tests.unit.slack_fixtures import approval, decided

SMALL = Rule(id="small-refunds", tool="issue_refund", action=RuleAction.AUTO_APPROVE)


def test_a_rule_decision_reads_decided_by_the_rule() -> None:
    """The decision line names ``rule:<id>`` as plain text, never as a user mention."""
    done = decided(
        approval(), ApprovalStatus.APPROVED, by=rule_actor(SMALL), reason="small refunds are fine"
    )
    line = blocks.decision_line(done)
    assert line.startswith("✅ Approved, decided by rule:small-refunds at ")
    assert "<@" not in line
    assert "decided by rule:small-refunds" in json.dumps(
        blocks.approval_card(done), ensure_ascii=False
    )
