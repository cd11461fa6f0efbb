"""Previews bound to the decision, on the in-memory fakes: drift, failure, edits, old approvals."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agent_runtime import (
    Agent,
    ApprovalPolicy,
    ApprovalStatus,
    RunId,
    RunStatus,
    Tools,
    tool,
)
from agent_runtime.history import timeline
from agent_runtime.models import ScriptedModel, ToolCall, text_reply, tool_reply
from agent_runtime.previews import Preview, Shown, compute
from agent_runtime.side_effects import PREVIEW_CHANGED, PREVIEW_FAILED
from agent_runtime.testing import AgentEnvironment

DANA = "U_DANA"
REFUND = tool_reply(
    ToolCall(id="c1", name="issue_refund", arguments={"order_id": "1042", "amount_cents": 4999})
)


class Orders:
    """Live order data the refund's preview reads; ``broken`` makes reading it fail."""

    def __init__(self) -> None:
        self.currency = {"1042": "USD"}
        self.broken = False
        self.charged: list[tuple[str, int, str]] = []

    def preview(self, args: dict[str, Any]) -> Preview:
        """The refund's preview: amount and currency of the order as they are now."""
        if self.broken:
            raise ConnectionError("orders service unreachable")
        currency = self.currency[args["order_id"]]
        return Preview(
            text=f"Refund {args['amount_cents'] / 100:.2f} {currency} for order {args['order_id']}",
            table=(("Currency", currency),),
        )

    def tools(self, *, previewed: bool = True) -> Tools:
        """The refund tool, with or without its preview."""

        def issue_refund(order_id: str, amount_cents: int) -> str:
            """Refund an order."""
            self.charged.append((order_id, amount_cents, self.currency[order_id]))
            return "refunded"

        policy = ApprovalPolicy(approvers=(DANA,))
        preview = self.preview if previewed else None
        return Tools(tool(side_effect=True, approval=policy, preview=preview)(issue_refund))


def environment(orders: Orders, *, previewed: bool = True) -> AgentEnvironment:
    """An agent that proposes one refund of order 1042, then answers."""
    tools = orders.tools(previewed=previewed)
    agent = Agent(name="t", model=ScriptedModel([]), system_prompt="", tools=tools)
    return AgentEnvironment(agent, [REFUND, text_reply("done")])


def parked(env: AgentEnvironment) -> tuple[RunId, str]:
    """Start the run and return it with its pending refund approval."""
    run_id = env.start("refund 1042")
    env.run_until_waiting(run_id)
    (approval,) = env.pending(run_id)
    return run_id, approval.id


def test_a_preview_digest_covers_its_text_and_table() -> None:
    """Two previews have the same digest exactly when their text and table are the same."""
    one = Preview(text="Refund 49.99 USD", table=(("Currency", "USD"),))
    assert one.digest == Preview(text="Refund 49.99 USD", table=(("Currency", "USD"),)).digest
    assert one.digest != Preview(text="Refund 49.99 USD", table=(("Currency", "EUR"),)).digest
    assert one.digest != Preview(text="Refund 49.99 EUR", table=(("Currency", "USD"),)).digest
    assert Preview.from_json(one.to_json()) == one


def test_a_failed_preview_has_no_digest_and_keeps_why() -> None:
    """A preview that raises is reported as its error, never raised, and matches nothing."""

    def failing(args: dict[str, Any]) -> Preview:
        raise TimeoutError("provider timed out")

    shown = compute(failing, {})
    assert shown == Shown(None, "TimeoutError: provider timed out")
    assert shown.digest is None
    assert shown.to_json() == {"error": "TimeoutError: provider timed out"}


def test_the_approval_stores_the_preview_the_approver_sees() -> None:
    """The approval is asked with the tool's preview and its digest beside the args hash."""
    orders = Orders()
    env = environment(orders)
    _, approval = parked(env)
    stored = env.approvals.get(approval)
    expected = orders.preview({"order_id": "1042", "amount_cents": 4999})
    assert stored.preview == expected.to_json()
    assert stored.preview_digest == expected.digest


def test_an_unchanged_preview_lets_the_approved_call_run() -> None:
    """With the same preview at execution as at approval, the call runs once."""
    orders = Orders()
    env = environment(orders)
    run_id, approval = parked(env)
    assert env.approve(approval, as_user=DANA).accepted
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert orders.charged == [("1042", 4999, "USD")]


def test_a_changed_preview_refuses_the_call_and_asks_again() -> None:
    """The order's currency changes after the approval: nothing runs, the approval is closed
    as superseded, and a new one is asked with the new preview; approving that one runs it."""
    orders = Orders()
    env = environment(orders)
    run_id, approval = parked(env)
    assert env.approve(approval, as_user=DANA).accepted
    orders.currency["1042"] = "EUR"
    run = env.run_until_waiting(run_id)
    assert run.status == RunStatus.WAITING
    assert orders.charged == []
    old = env.approvals.get(approval)
    assert (old.status, old.reason, old.consumed_by) == (
        ApprovalStatus.SUPERSEDED,
        PREVIEW_CHANGED,
        None,
    )
    from bot.cli.render import approval_line

    listed = approval_line(old)  # who approved it did not supersede it
    assert f"superseded (approved by {DANA})" in listed
    assert f"by {DANA}  " not in listed
    (again,) = env.pending(run_id)
    assert again.preview is not None
    assert "EUR" in again.preview["text"]
    assert again.preview_digest != old.preview_digest
    entries = timeline(run, env.journal(run_id), [], [old, again], env.agent)
    assert any(e.detail.get("refused") == PREVIEW_CHANGED for e in entries)
    assert env.approve(again, as_user=DANA).accepted
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert orders.charged == [("1042", 4999, "EUR")]


def test_a_preview_that_fails_before_execution_refuses_the_call() -> None:
    """If the preview cannot be computed just before running, the call does not run and the
    model is told why."""
    orders = Orders()
    env = environment(orders)
    run_id, approval = parked(env)
    assert env.approve(approval, as_user=DANA).accepted
    orders.broken = True
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert orders.charged == []
    told = [m.content for m in env.model.requests[-1].messages if m.role == "tool"]  # type: ignore[union-attr]
    assert told[0].startswith(f"not executed: {PREVIEW_FAILED}: ConnectionError")


def test_a_call_asked_without_a_preview_is_asked_again_once_one_is_shown() -> None:
    """A preview that failed when asked was never seen: approving runs nothing, and the call
    is asked again with the preview once it can be computed."""
    orders = Orders()
    orders.broken = True
    env = environment(orders)
    run_id, approval = parked(env)
    assert env.approvals.get(approval).preview == {
        "error": "ConnectionError: orders service unreachable"
    }
    assert env.approve(approval, as_user=DANA).accepted
    orders.broken = False
    env.run_until_waiting(run_id)
    assert orders.charged == []
    (again,) = env.pending(run_id)
    assert again.preview_digest is not None


def test_an_edit_binds_the_decision_to_the_edited_preview() -> None:
    """Edited arguments get their own preview, stored with the decision and checked at run."""
    orders = Orders()
    env = environment(orders)
    run_id, approval = parked(env)
    assert env.edit(approval, {"order_id": "1042", "amount_cents": 1000}, as_user=DANA).accepted
    decided = env.approvals.get(approval)
    assert decided.preview is not None
    assert decided.preview["text"].startswith("Refund 10.00 USD")
    assert decided.preview_digest == orders.preview(decided.proposed_args).digest
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert orders.charged == [("1042", 1000, "USD")]


def test_an_approval_asked_before_the_tool_had_a_preview_still_runs() -> None:
    """An approval stored without a preview digest (asked before previews) runs unchecked
    even though the tool now declares a preview."""
    orders = Orders()
    env = environment(orders, previewed=False)
    run_id, approval = parked(env)
    assert env.approvals.get(approval).preview_digest is None
    assert env.approve(approval, as_user=DANA).accepted
    previewed = {t.name: t for t in orders.tools()}["issue_refund"]
    for item in env.agent.tools:  # the same tool, now with a preview (same fingerprint)
        object.__setattr__(item, "preview", previewed.preview)
    orders.currency["1042"] = "EUR"
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert orders.charged == [("1042", 4999, "EUR")]


def test_only_tools_that_need_an_approval_take_a_preview() -> None:
    """A preview on a tool without an approval is refused when the tool is made."""

    def lookup(order_id: str) -> str:
        """Look an order up."""
        return order_id

    with pytest.raises(ValueError, match="take a preview"):
        tool(preview=Orders().preview)(lookup)


def test_the_preview_checked_is_that_of_the_arguments_that_run() -> None:
    """Stored decided arguments tampered without their hash change nothing: the preview is
    computed for the approved arguments the run received, which match, so they run."""
    orders = Orders()
    orders.currency["1045"] = "GBP"
    env = environment(orders)
    run_id, approval = parked(env)
    assert env.approve(approval, as_user=DANA).accepted
    stored = env.approval_store._approvals[approval]
    other = {"order_id": "1045", "amount_cents": 89900}
    env.approval_store._approvals[approval] = dataclasses.replace(stored, decided_args=other)
    assert env.run_until_waiting(run_id).status == RunStatus.COMPLETED
    assert orders.charged == [("1042", 4999, "USD")]


def test_a_preview_table_takes_numbers_as_text_and_refuses_other_values() -> None:
    """A number in a preview's table is shown as its text (it failed the preview with
    "object of type 'float' has no len()"); a value of another type is refused by name, and
    ``Preview`` is exported where the README's tools are."""
    import agent_runtime

    assert agent_runtime.Preview is Preview
    shown = Preview(text="refund", table=[("Amount", 49.99), ("Items", 3)])  # type: ignore[arg-type]
    assert shown.table == (("Amount", "49.99"), ("Items", "3"))
    with pytest.raises(TypeError, match="text \\(or numbers\\), not None"):
        Preview(table=(("Amount", None),))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pairs"):
        Preview(table=("Amount",))  # type: ignore[arg-type]
