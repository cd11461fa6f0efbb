"""Clicks on a batch of calls from one model turn: Approve all, Reject all (one reason)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack
from slack_sdk import WebClient

from agent_runtime import Actor, Approval, Approvals
from bot.slack import blocks
from bot.slack.batch_blocks import parse_batch, reject_all_modal
from bot.slack.batch_decisions import (
    BatchOutcome,
    approve_batch,
    refusals,
    reject_batch,
    waiting,
)
from bot.slack.grant_listeners import OpenModal, Submit, Tell, Visible
from bot.slack.guard import is_approval_id
from bot.slack.payloads import actor_of, click, input_value
from bot.slack.reconnect import BEFORE_ACK


@dataclass(frozen=True, slots=True)
class BatchListeners:
    """Each call of a batch is still decided, hashed and audited on its own."""

    approvals: Approvals
    tell: Tell
    visible: Visible
    open_modal: OpenModal
    submit: Submit

    def approve_all(self, ack: Ack, body: dict[str, Any]) -> None:
        """Approve all: each call of the batch approved for the arguments its card showed."""
        ack()
        self.submit(body, self._approve_all, "approve_all")

    def _approve_all(self, body: dict[str, Any]) -> None:
        value, actor = click(body)
        refs = dict(blocks.parse_approval_ref(ref) for ref in parse_batch(value))
        batch = self._batch(body, list(refs), actor)
        if batch is not None:
            outcome = approve_batch(self.approvals, [(a, refs[a.id]) for a in batch], actor)
            self.tell(body, actor, outcome.summary())

    def open_reject_all(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Reject all: ask for one reason in a modal, if the clicker may decide every call."""
        ack()
        value, actor = click(body)
        batch = self._batch(body, parse_batch(value), actor)
        if batch is None:
            return
        refused = refusals(self.approvals, batch, actor)
        if refused:
            self.tell(body, actor, BatchOutcome(refused=refused).summary())
            return
        self.open_modal(body, actor, client, reject_all_modal([a.id for a in waiting(batch)]))

    def submit_reject_all(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The reject-all modal's submit: one reason, each call rejected on its own."""
        reason = input_value(view, "reason")
        if not reason.strip():
            ack(response_action="errors", errors={"reason": "Give the agent a reason."})
            return
        ids = [i for i in parse_batch(str(view.get("private_metadata"))) if is_approval_id(i)]
        actor = actor_of(body)
        outcome = BEFORE_ACK.call(
            lambda: reject_batch(
                self.approvals, [self.approvals.get(i) for i in ids], actor, reason
            )
        )
        if outcome.decided or not outcome.refused:
            ack()
        else:
            ack(response_action="errors", errors={"reason": outcome.summary()[:300]})

    def _batch(
        self, body: dict[str, Any], approval_ids: list[str], actor: Actor
    ) -> list[Approval] | None:
        """Return a batch's approvals (of one run) if ``actor`` may see them; else tell them."""
        batch = []
        for approval_id in approval_ids:
            approval = self.visible(body, approval_id, actor)
            if approval is None:
                return None
            batch.append(approval)
        if len({a.run_id for a in batch}) != 1:
            self.tell(body, actor, "Sorry: there is no such batch of approvals.")
            return None
        return batch
