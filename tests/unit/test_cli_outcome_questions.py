"""A question about a call a crash cut off reads as that question on the command line, and
deciding it says what follows: rejecting it runs the call again."""

from __future__ import annotations

from dataclasses import replace

from agent_runtime import Decision, RunId, RunStatus, UnknownOutcome
from bot.cli.agents import _meaning
from bot.cli.render import OUTCOME_MEANING, approval_line, run_detail
from tests.unit.agent_harness import DANA, DONE, REFUND, AgentHarness


def _asked_whether_it_happened() -> tuple[AgentHarness, RunId, str, str]:
    """A run whose approved refund was cut off by a crash: its tool asks a person. Return
    the harness, the run, the refund's approval and the question."""
    h = AgentHarness([REFUND, DONE], outcome=UnknownOutcome.ASK)
    run_id, approval = h.refund_cut_off_by_a_crash()
    (question,) = h.pending(run_id)
    return h, run_id, approval, question


def test_a_listed_question_says_what_it_asks_and_what_each_answer_does() -> None:
    """``signoff approvals`` and ``signoff show`` give the question and what approve and
    reject do; the tool call's own approval is listed as before, without them."""
    h, run_id, approval, question = _asked_whether_it_happened()
    asked = h.approvals.get(question)
    line = approval_line(asked)
    assert "issue_refund [did it happen?]" in line
    assert "Did it happen? Approve = yes, it happened; Reject = no, run it again." in line
    shown = run_detail(h.run(run_id), [], [], [asked])
    assert "issue_refund [did it happen?]" in shown
    assert "Reject = no, run it again." in shown
    first = approval_line(h.approvals.get(approval))
    assert "[did it happen?]" not in first
    assert "Did it happen?" not in first
    unasked = approval_line(replace(asked, reason_asked=""))  # asked without its question
    assert OUTCOME_MEANING in unasked


def test_rejecting_the_question_says_the_call_runs_again() -> None:
    """The answer to ``signoff reject`` says the call runs again, and so it does."""
    h, run_id, _, question = _asked_whether_it_happened()
    result = h.approvals.decide(question, DANA, Decision.REJECT, reason="not in the ledger")
    assert result.accepted
    said = _meaning(result.approval, Decision.REJECT, result.accepted)
    assert said == "\nrecorded that issue_refund did not happen: it runs again"
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    assert h.calls["issue_refund"] == 2


def test_approving_the_question_says_the_call_is_not_run_again() -> None:
    """The answer to ``signoff approve`` says the call is not run again, and it is not."""
    h, run_id, _, question = _asked_whether_it_happened()
    result = h.approvals.decide(question, DANA, Decision.APPROVE)
    said = _meaning(result.approval, Decision.APPROVE, result.accepted)
    assert said == "\nrecorded that issue_refund happened: it is not run again"
    h.work()
    assert h.run(run_id).status == RunStatus.COMPLETED
    assert h.calls["issue_refund"] == 1
