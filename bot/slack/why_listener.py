"""The "Why?" button: the model step that proposed a card's call, rebuilt from the journal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack
from slack_sdk import WebClient

from agent_runtime import (
    AgentInput,
    Agents,
    Approval,
    Approvals,
    InvalidInput,
    Runtime,
    SignoffError,
    parse_run_id,
)
from agent_runtime.agent_loop import ModelResolver, with_model
from agent_runtime.proposal import Proposal, proposal
from bot.slack import blocks
from bot.slack.grant_listeners import OpenModal, Tell, Visible
from bot.slack.payloads import click
from bot.slack.text import escape
from bot.slack.why import why_modal


@dataclass(frozen=True, slots=True)
class WhyListener:
    """Opens the "Why?" modal for whoever may see the card."""

    runtime: Runtime
    agents: Agents
    approvals: Approvals
    models: ModelResolver | None
    tell: Tell
    visible: Visible
    open_modal: OpenModal

    def why(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Show the model step that proposed a card's call (to whoever may see the card)."""
        ack()
        value, actor = click(body)
        approval = self.visible(body, blocks.parse_approval_ref(value)[0], actor)
        if approval is None:
            return
        try:
            reasons = self._proposal(approval)
        except SignoffError as exc:
            self.tell(body, actor, f"Sorry: {escape(str(exc))}")
            return
        self.open_modal(body, actor, client, why_modal(approval, reasons))

    def _proposal(self, approval: Approval) -> Proposal:
        run = self.runtime.get(parse_run_id(approval.run_id))
        agent = self.agents.for_workflow(run.workflow)
        if agent is None:
            raise InvalidInput("why", f"run {run.id} is not an agent run")
        data = AgentInput.of(run.input)
        return proposal(
            with_model(agent, None if data is None else data.model, self.models),
            self.approvals,
            run,
            self.runtime.journal(run.id),
            approval.position,
        )
