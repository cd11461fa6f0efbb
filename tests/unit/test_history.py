"""A run's timeline is read from its journal: tokens, cost, approvals, retries, errors."""

from __future__ import annotations

from agent_runtime import Budget, Decision, RunStatus
from agent_runtime.history import timeline
from agent_runtime.models import ToolCall, text_reply, tool_reply
from tests.unit.agent_harness import DANA, AgentHarness

REFUND = tool_reply(
    ToolCall(id="c2", name="issue_refund", arguments={"order_id": "1042", "amount_cents": 4999})
)


def test_timeline_shows_usage_budget_left_and_the_decision() -> None:
    """Model entries carry tokens, cost and budget left; the wait shows who decided what."""
    h = AgentHarness([REFUND, text_reply("done")], budget=Budget(model_calls=5, tokens=50_000))
    run_id = h.start()
    h.work()
    (approval,) = h.pending(run_id)
    h.approvals.decide(approval, DANA, Decision.REJECT, reason="not this one")
    h.work()
    run = h.run(run_id)
    assert run.status == RunStatus.COMPLETED
    entries = [
        e.to_json()
        for e in timeline(
            run,
            h.runtime.journal(run_id),
            h.runtime.attempts(run_id),
            h.approval_store.list_approvals(run_id=run_id),
            h.agent,
        )
    ]
    models = [e for e in entries if e["name"] == "model"]
    assert [m["budget_left"]["model_calls"] for m in models] == [4, 3]
    assert models[0]["input_tokens"] > 0
    assert models[1]["budget_left"]["tokens"] == (
        50_000 - sum(m["input_tokens"] + m["output_tokens"] for m in models)
    )
    [wait] = [e for e in entries if "approval" in e]
    assert (wait["approval"]["decision"], wait["approval"]["by"], wait["approval"]["reason"]) == (
        "rejected",
        "dana",
        "not this one",
    )
    assert [e["position"] for e in entries] == list(range(len(entries)))


def test_a_model_call_of_a_run_without_limits_has_no_budget_left_on_its_line() -> None:
    """``signoff history`` of a run without a budget shows its model calls' tokens and cost,
    and no empty "left" after them (it ended its lines with "· left ")."""
    from bot.cli.render import history_line

    h = AgentHarness([text_reply("done")])
    run_id = h.start()
    h.work()
    run = h.run(run_id)
    entries = timeline(run, h.runtime.journal(run_id), h.runtime.attempts(run_id), [], h.agent)
    lines = [history_line(e) for e in entries if e.name == "model"]
    assert lines
    assert all("tokens $" in line for line in lines)
    assert not any("left" in line for line in lines), lines
