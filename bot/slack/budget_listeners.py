"""The listeners of the budget card: "Raise by …" (two modals), and "End the run".

Each acks, parses, and calls ``budget_control.decide_budget``: the same code path as
``signoff raise-budget``, so who may act, the quorum, the compare-and-set and the audit
entry are those of any approval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack
from slack_sdk import WebClient

from agent_runtime import (
    Actor,
    Agents,
    Approval,
    Approvals,
    Budget,
    Decision,
    Runtime,
    parse_run_id,
)
from agent_runtime.approvals import ApprovalKind
from agent_runtime.budget_ask import raised_arguments
from agent_runtime.budget_control import BudgetOutcome, decide_budget
from agent_runtime.exceptions import (
    ApprovalNotFound,
    InvalidInput,
    InvalidRunState,
    RunNotFound,
    StoreUnavailable,
)
from bot.slack.blocks import parse_approval_ref
from bot.slack.budget_blocks import (
    AMOUNT_BLOCK,
    amount_modal,
    confirm_modal,
    limit_key,
    outcome_modal,
    parse_confirm,
)
from bot.slack.grant_listeners import OpenModal, Submit, Tell, Visible
from bot.slack.guard import is_approval_id
from bot.slack.payloads import actor_of, click, input_value
from bot.slack.reconnect import BEFORE_ACK
from bot.slack.text import escape

INTEGER_LIMITS = ("tokens", "model_calls", "tool_calls")
GONE = "This budget is no longer waiting for a decision."


@dataclass(frozen=True, slots=True)
class BudgetListeners:
    """Clicks and submissions of the budget card."""

    runtime: Runtime
    agents: Agents
    approvals: Approvals
    tell: Tell
    visible: Visible
    open_modal: OpenModal
    submit: Submit

    def open_raise(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Raise by …: open the amount modal, if the clicker may decide the raise."""
        ack()
        self.submit(body, lambda b: self._open_raise(b, client), "budget_raise")

    def _open_raise(self, body: dict[str, Any], client: WebClient) -> None:
        value, actor = click(body)
        approval = self._budget(body, value, actor)
        if approval is None:
            return
        refused = self.approvals.refuse(approval.id, actor, Decision.EDIT)
        if refused is not None:
            self.tell(body, actor, f"Not recorded: {escape(refused.message)}.")
            return
        self.open_modal(body, actor, client, amount_modal(approval))

    def end(self, ack: Ack, body: dict[str, Any]) -> None:
        """End the run: cancel it, its approvals closed, if the clicker may decide."""
        ack()
        self.submit(body, self._end, "budget_end")

    def _end(self, body: dict[str, Any]) -> None:
        value, actor = click(body)
        approval = self._budget(body, value, actor)
        if approval is None:
            return
        try:
            outcome = self._decide(approval.id, actor, end=True)
        except (InvalidRunState, ApprovalNotFound, RunNotFound):
            self.tell(body, actor, GONE)
            return
        if not outcome.accepted:
            self.tell(body, actor, f"Not recorded: {escape(outcome.message)}.")

    def submit_amount(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The amount's submit: a valid raise is shown again as the new limit; errors show
        under the amount."""
        ref = str(view.get("private_metadata"))
        approval_id = parse_approval_ref(ref)[0]
        try:
            if not is_approval_id(approval_id):
                raise ApprovalNotFound(approval_id[:40])
            approval = BEFORE_ACK.call(lambda: self.approvals.get(approval_id))
            raise_to = _raise_to(approval, input_value(view, AMOUNT_BLOCK))
        except InvalidInput as exc:
            ack(response_action="errors", errors={AMOUNT_BLOCK: exc.detail[:300]})
            return
        except ApprovalNotFound:
            ack(response_action="errors", errors={AMOUNT_BLOCK: GONE})
            return
        ack(response_action="update", view=confirm_modal(approval, raise_to, ref))

    def submit_confirm(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The confirmation's submit: the raise is decided; a refusal shows in the modal."""
        ref, raise_to = parse_confirm(str(view.get("private_metadata")))
        approval_id, seen_hash = parse_approval_ref(ref)
        actor = actor_of(body)
        try:
            if not is_approval_id(approval_id):
                raise ApprovalNotFound(approval_id[:40])
            outcome = BEFORE_ACK.call(
                lambda: self._decide(approval_id, actor, raise_to=raise_to, seen_hash=seen_hash)
            )
        except InvalidInput as exc:
            ack(response_action="update", view=outcome_modal(escape(exc.detail)))
            return
        except (InvalidRunState, ApprovalNotFound, RunNotFound):
            ack(response_action="update", view=outcome_modal(GONE))
            return
        except StoreUnavailable:
            text = "Signoff could not reach its database, so nothing was recorded. Try again."
            ack(response_action="update", view=outcome_modal(text))
            return
        if outcome.accepted:
            ack()
        else:
            ack(response_action="update", view=outcome_modal(escape(outcome.message)))

    def _decide(
        self,
        approval_id: str,
        actor: Actor,
        *,
        end: bool = False,
        raise_to: dict[str, Any] | None = None,
        seen_hash: str | None = None,
    ) -> BudgetOutcome:
        """Raise or end through ``decide_budget``, for the run of the approval shown."""
        approval = self.approvals.get(approval_id)
        run = self.runtime.get(parse_run_id(approval.run_id))
        agent = self.agents.for_workflow(run.workflow)
        if agent is None:
            raise RunNotFound(run.id)
        return decide_budget(
            self.runtime,
            agent,
            run.id,
            actor,
            limits=None if raise_to is None else Budget.from_json(raise_to),
            end=end,
            seen_hash=seen_hash,
            approval_id=approval.id,
        )

    def _budget(self, body: dict[str, Any], value: str, actor: Actor) -> Approval | None:
        """Return the budget approval a button carries if the clicker may see it."""
        approval = self.visible(body, parse_approval_ref(value)[0], actor)
        if approval is not None and approval.kind != ApprovalKind.BUDGET:
            self.tell(body, actor, "Sorry: there is no such budget.")
            return None
        return approval


def _raise_to(approval: Approval, text: str) -> dict[str, Any]:
    """The limits a raise by the typed ``text`` gives (``InvalidInput`` says what is wrong)."""
    key = limit_key(approval)
    try:
        by = float(text.strip().lstrip("$").replace(",", ""))
    except ValueError:
        raise InvalidInput("budget", "Type a number, like 0.05.") from None
    if not math.isfinite(by) or by <= 0:
        raise InvalidInput("budget", "Type an amount above zero.")
    if key in INTEGER_LIMITS and not by.is_integer():
        raise InvalidInput("budget", "Type a whole number.")
    current = (approval.args.get("budget") or {}).get(key) or 0
    new: float | int = int(current + by) if key in INTEGER_LIMITS else round(current + by, 6)
    raised_arguments(approval.args, {key: new})
    return {key: new}
