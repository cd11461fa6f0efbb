"""Replay: re-running a finished agent run's workflow over its journal calls nothing.

Each run is driven to completion on the in-memory fakes (approvals, a rejection, an edit, a
crash with an unknown outcome, a budget raised on the way); then the workflow function is
called again with a ``RunContext`` over the finished journal — what a resumed worker does —
and must return the same output while the scripted model and the counted tools stay still
and nothing is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from agent_runtime import Budget, Decision, Lease, RunContext, RunId, RunStatus
from agent_runtime.agent_loop import agent_workflow
from agent_runtime.budget_control import decide_budget
from agent_runtime.models import ToolCall, text_reply, tool_reply
from tests.unit.agent_harness import DANA, OMAR, AgentHarness, Crash

LOOKUP = tool_reply(ToolCall(id="c1", name="lookup_order", arguments={"order_id": "1042"}))
BOTH = tool_reply(
    ToolCall(id="c2", name="issue_refund", arguments={"order_id": "1042", "amount_cents": 4999}),
    ToolCall(id="c3", name="send_email", arguments={"to": "d@example.com", "body": "hi"}),
)
DONE = text_reply("done")


def approve_all(h: AgentHarness, run_id: RunId) -> None:
    """Approve every pending approval of the run and work it."""
    for approval in h.pending(run_id):
        assert h.approvals.decide(approval, DANA, Decision.APPROVE).accepted
    h.work()


def approved(h: AgentHarness, run_id: RunId) -> None:
    """Both calls approved."""
    h.work()
    approve_all(h, run_id)


def rejected_and_edited(h: AgentHarness, run_id: RunId) -> None:
    """The email rejected, the refund approved with a smaller amount."""
    h.work()
    refund, email = h.pending(run_id)
    assert h.approvals.decide(email, OMAR, Decision.REJECT, reason="we call instead").accepted
    assert h.approvals.decide(
        refund, DANA, Decision.EDIT, edited_args={"order_id": "1042", "amount_cents": 100}
    ).accepted
    h.work()


def crashed_after_the_refund(h: AgentHarness, run_id: RunId) -> None:
    """The worker dies after the refund ran, before its result was journaled."""
    h.work()
    h.crash_after_refund = True
    with pytest.raises(Crash):
        approve_all(h, run_id)
    h.clock.advance(timedelta(minutes=1))
    h.work()


def budget_raised(h: AgentHarness, run_id: RunId) -> None:
    """The 2-call budget runs out before the answer; a person raises it."""
    h.work()
    approve_all(h, run_id)
    raised = decide_budget(h.runtime, h.agent, run_id, DANA, limits=Budget(model_calls=5))
    assert raised.accepted, raised.message
    h.work()


@pytest.mark.parametrize(
    "drive",
    [approved, rejected_and_edited, crashed_after_the_refund, budget_raised],
    ids=lambda f: f.__name__,
)
def test_replaying_a_finished_run_makes_no_model_or_tool_call(
    drive: Callable[[AgentHarness, RunId], None],
) -> None:
    """The finished journal answers every model and tool call: zero calls, the same output."""
    budget = Budget(model_calls=2) if drive is budget_raised else None
    h = AgentHarness([LOOKUP, BOTH, DONE], budget=budget)
    run_id = h.start()
    drive(h, run_id)
    run = h.run(run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    model_calls, requests, tool_calls = h.model.calls, len(h.model.requests), dict(h.calls)
    assert model_calls == 3
    assert sum(tool_calls.values()) >= 2
    journal = h.store.load_journal(run_id)

    context = RunContext(
        run=run,
        lease=Lease(run_id, "replayer", run.fence),
        journal=journal,
        store=h.store,
        clock=h.clock,
        stopping=threading.Event(),
    )
    output = agent_workflow(h.agent, h.approvals)(context, run.input)
    context.check_complete()

    assert output == run.output
    assert context.position == len(journal), "every journal entry was replayed"
    assert (h.model.calls, len(h.model.requests)) == (model_calls, requests), "no model call"
    assert dict(h.calls) == tool_calls, "no tool call"
    assert h.store.load_journal(run_id) == journal, "nothing written"
