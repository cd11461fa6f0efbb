"""Decisions as a waiting run reads them: one typed outcome per approval status, and a
raise or an end of an exhausted budget."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from agent_runtime.approvals import (
    Actor,
    Approval,
    ApprovalStatus,
    Decision,
    Refusal,
    expire,
    judge,
)
from agent_runtime.budget import EndRun, RaiseBudget, read_budget_decision
from agent_runtime.decisions import (
    Approved,
    Cancelled,
    Expired,
    Rejected,
    read_decision,
    status_of,
)
from agent_runtime.side_effects import ToolResult
from tests.unit.slack_fixtures import ASKED, DANA, OMAR, approval

DANA_NAMED = dataclasses.replace(DANA, name="dana")
LATER = ASKED + timedelta(minutes=5)


def _taken(verdict: Approval | Refusal) -> Approval:
    assert isinstance(verdict, Approval), verdict
    return verdict


def test_an_approval_reads_as_approved_with_the_arguments_signed() -> None:
    """An approved summary reads as ``Approved`` with the signed (edited) arguments, their
    hash, who decided and when."""
    asked = approval(policy=dataclasses.replace(approval().policy, required=1))
    decided = _taken(judge(asked, DANA_NAMED, Decision.EDIT, LATER, edited_args={"order_id": "7"}))
    assert decided.decided_args_hash is not None
    found = read_decision(decided.summary())
    assert found == Approved(
        approval_id=asked.id,
        args={"order_id": "7"},
        args_hash=decided.decided_args_hash,
        by=DANA_NAMED,
        at=LATER,
    )
    assert status_of(found) == ApprovalStatus.APPROVED


def test_the_other_outcomes_read_as_their_own_types_and_decline_the_call() -> None:
    """Rejected, expired and cancelled summaries read as their types, and the message the
    model gets names the status, who decided (the deadline when nobody did) and why."""
    asked = approval()
    rejected = _taken(judge(asked, OMAR, Decision.REJECT, LATER, reason="too much"))
    expired = expire(asked, LATER)
    cancelled = dataclasses.replace(
        asked,
        status=ApprovalStatus.CANCELLED,
        decided_by=DANA_NAMED,
        decided_at=LATER,
        reason="the run was cancelled by dana",
    )
    outcomes = [read_decision(a.summary()) for a in (rejected, expired, cancelled)]
    assert outcomes == [
        Rejected(approval_id=asked.id, reason="too much", by=OMAR, at=LATER),
        Expired(approval_id=asked.id, reason="no decision before the deadline", at=LATER),
        Cancelled(
            approval_id=asked.id, reason="the run was cancelled by dana", by=DANA_NAMED, at=LATER
        ),
    ]
    declined = [o for o in outcomes if not isinstance(o, Approved)]
    assert [ToolResult.declined(o).content for o in declined] == [
        "not executed: rejected by U_OMAR: too much",
        "not executed: expired by the deadline: no decision before the deadline",
        "not executed: cancelled by dana: the run was cancelled by dana",
    ]


def test_a_summary_journaled_before_reads_and_a_pending_one_is_refused() -> None:
    """A decision as journals already hold it (the summary's JSON) reads; a summary of an
    undecided approval is not a decision."""
    journaled = {
        "approval_id": "a" * 24,
        "status": "rejected",
        "decided_by": {"user_id": "U_DANA", "team_id": "T1", "name": "dana"},
        "decided_at": "2026-03-01T09:35:00+00:00",
        "args": None,
        "args_hash": None,
        "reason": "no",
    }
    assert read_decision(journaled) == Rejected(
        approval_id="a" * 24,
        reason="no",
        by=Actor(user_id="U_DANA", team_id="T1", name="dana"),
        at=datetime(2026, 3, 1, 9, 35, tzinfo=UTC),
    )
    with pytest.raises(ValueError, match="not decided"):
        read_decision(approval().summary())


def test_a_budget_decision_reads_as_a_raise_with_its_limits_or_as_the_end() -> None:
    """A raise carries the limits given (none given: none changed); an end, or anything
    that is no raise, ends the run, as the loop always treated it."""
    raised = {"action": "raise", "by": {"user_id": "U_DANA"}, "limits": {"cost_usd": 0.5}}
    assert read_budget_decision(raised) == RaiseBudget(limits={"cost_usd": 0.5})
    assert read_budget_decision({"action": "raise"}) == RaiseBudget(limits={})
    assert read_budget_decision({"action": "end", "limits": {"cost_usd": 9}}) == EndRun()
    assert read_budget_decision({}) == EndRun()
