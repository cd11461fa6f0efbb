"""Approval rules in the agent loop: automatic decisions, limits, shadow mode, the audit log."""

from __future__ import annotations

from typing import Any

from agent_runtime import Agent, ApprovalPolicy, RunStatus, Tools, tool
from agent_runtime.approvals import ApprovalStatus
from agent_runtime.audit_report import examine
from agent_runtime.models import ScriptedModel, ToolCall, text_reply, tool_reply
from agent_runtime.rules import Rules
from agent_runtime.testing import AgentEnvironment, ToolCallRecord


def refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return f"refunded {amount_cents}"


AGENT = Agent(
    name="refunds",
    model=ScriptedModel([]),
    system_prompt="refund carefully",
    tools=Tools(tool(side_effect=True, approval=ApprovalPolicy(approvers=("U_DANA",)))(refund)),
    approver_groups={"support": ("U_REQUESTER",)},
)


def _refund(amount: int, call: str = "c1") -> Any:
    return tool_reply(
        ToolCall(id=call, name="refund", arguments={"order_id": "7", "amount_cents": amount})
    )


def _rules(action: str, *, mode: str = "enforce", **limits: Any) -> Rules:
    return Rules.parse(
        {
            "rules": [
                {
                    "id": "small-refunds",
                    "tool": "refund",
                    "action": action,
                    "mode": mode,
                    "reason": "small refunds by support are fine",
                    "when": {
                        "all": [
                            {"field": "args.amount_cents", "op": "<=", "value": 5000},
                            {"field": "requester", "op": "in", "value": "group:support"},
                        ]
                    },
                    "limits": limits,
                }
            ]
        }
    )


def _actions(env: AgentEnvironment) -> list[str]:
    entries, heads = env.approval_store.audit_log()
    assert examine(entries, heads).problems == []
    return [entry.action for entry in entries]


def test_an_auto_approval_runs_the_tool_without_a_person() -> None:
    """A call inside the rule's predicate is approved by rule:<id> and the tool runs at once."""
    env = AgentEnvironment(AGENT, [_refund(4999), text_reply("done")], rules=_rules("auto_approve"))
    run_id = env.start("refund order 7")
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert env.tool_calls == [
        ToolCallRecord("refund", {"order_id": "7", "amount_cents": 4999}, "refunded 4999")
    ]
    (approval,) = env.approval_store.list_approvals(run_id=run_id)
    assert approval.decided_by is not None
    assert approval.decided_by.user_id == "rule:small-refunds"
    entries, _ = env.approval_store.audit_log()
    assert [e.action for e in entries] == ["requested", "approve"]
    assert entries[1].detail is not None
    assert entries[1].detail["rule_version"] == _rules("auto_approve").rules[0].version


def test_a_call_outside_the_predicate_waits_for_a_person() -> None:
    """Above the amount the rule allows, the approval stays pending and nothing runs."""
    env = AgentEnvironment(AGENT, [_refund(5001), text_reply("done")], rules=_rules("auto_approve"))
    run_id = env.start("refund order 7")
    assert env.run_until_waiting(run_id).status == RunStatus.WAITING
    assert len(env.pending(run_id)) == 1
    assert env.tool_calls == []
    assert _actions(env) == ["requested"]


def test_a_rule_past_its_per_run_limit_leaves_the_call_to_a_person() -> None:
    """With per_run 1, the second matching call of a run waits for a person."""
    env = AgentEnvironment(
        AGENT,
        [_refund(100, "c1"), _refund(200, "c2"), text_reply("done")],
        rules=_rules("auto_approve", per_run=1),
    )
    run_id = env.start("refund order 7 twice")
    assert env.run_until_waiting(run_id).status == RunStatus.WAITING
    assert [c.arguments["amount_cents"] for c in env.tool_calls] == [100]
    (pending,) = env.pending(run_id)
    assert pending.args["amount_cents"] == 200
    assert _actions(env) == ["requested", "approve", "requested", "rule.limited"]


def test_a_daily_total_counts_earlier_auto_approvals() -> None:
    """A daily total of 300 approves 100 and 200, then leaves 1 more cent to a person."""
    script = [_refund(100, "c1"), _refund(200, "c2"), _refund(1, "c3"), text_reply("done")]
    env = AgentEnvironment(
        AGENT,
        script,
        rules=_rules("auto_approve", daily_total={"field": "amount_cents", "max": 300}),
    )
    run_id = env.start("three refunds")
    env.run_until_waiting(run_id)
    assert [c.arguments["amount_cents"] for c in env.tool_calls] == [100, 200]
    assert [a.args["amount_cents"] for a in env.pending(run_id)] == [1]


def test_a_deny_rule_rejects_with_its_reason_and_the_tool_never_runs() -> None:
    """A deny rule rejects at once as rule:<id>, the model hears why, and nothing runs."""
    env = AgentEnvironment(
        AGENT, [_refund(4999), text_reply("could not refund")], rules=_rules("deny")
    )
    run_id = env.start("refund order 7")
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert env.tool_calls == []
    (approval,) = env.approval_store.list_approvals(run_id=run_id)
    assert approval.status == ApprovalStatus.REJECTED
    assert approval.reason == "small refunds by support are fine"
    assert env.model is not None
    assert "rejected by rule:small-refunds" in str(env.model.requests[-1].messages[-1])
    assert _actions(env) == ["requested", "reject"]


def test_a_shadow_rule_records_what_it_would_do_and_changes_nothing() -> None:
    """A shadow rule leaves the approval to a person; the log says what the rule would do."""
    env = AgentEnvironment(
        AGENT, [_refund(4999), text_reply("done")], rules=_rules("auto_approve", mode="shadow")
    )
    run_id = env.start("refund order 7")
    assert env.run_until_waiting(run_id).status == RunStatus.WAITING
    (approval,) = env.pending(run_id)
    assert env.reject(approval, as_user="U_DANA", reason="not this one").accepted
    env.run_until_waiting(run_id)
    assert env.tool_calls == []
    entries, _ = env.approval_store.audit_log()
    assert [e.action for e in entries] == ["requested", "rule.shadow", "reject"]
    assert entries[1].detail is not None
    assert entries[1].detail["would"] == "auto_approve"
    assert entries[1].actor == {
        "user_id": "rule:small-refunds",
        "team_id": "",
        "name": "rule:small-refunds",
    }


def _channel_rules(op: str) -> Rules:
    return Rules.parse(
        [
            {
                "id": "support-channel",
                "tool": "refund",
                "action": "auto_approve",
                "when": [{"field": "channel", "op": op, "value": ["C_SUPPORT"]}],
            }
        ]
    )


def _decided_by(rules: Rules, context: dict[str, Any]) -> str | None:
    env = AgentEnvironment(AGENT, [_refund(10), text_reply("done")], rules=rules)
    run_id = env.start("refund order 7", context=context)
    env.run_until_waiting(run_id)
    (approval,) = env.approval_store.list_approvals(run_id=run_id)
    return None if approval.decided_by is None else approval.decided_by.user_id


def test_a_rule_on_the_channel_decides_only_in_that_channel() -> None:
    """``channel in [C_SUPPORT]`` approves a run started there (from Slack or by context),
    not one started elsewhere or from no channel at all."""
    rules = _channel_rules("in")
    assert _decided_by(rules, {"slack": {"channel": "C_SUPPORT"}}) == "rule:support-channel"
    assert _decided_by(rules, {"channel": "C_SUPPORT"}) == "rule:support-channel"
    assert _decided_by(rules, {"slack": {"channel": "C_RANDOM"}}) is None
    assert _decided_by(rules, {}) is None


def test_a_channel_condition_is_false_when_the_run_has_no_channel() -> None:
    """``channel not_in [C_SUPPORT]`` does not approve a run started from no channel."""
    rules = _channel_rules("not_in")
    assert _decided_by(rules, {"slack": {"channel": "C_RANDOM"}}) == "rule:support-channel"
    assert _decided_by(rules, {}) is None
