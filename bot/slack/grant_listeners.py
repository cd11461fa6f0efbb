"""The listeners of the grant buttons: approve and allow similar calls, and revoke."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt import Ack
from slack_sdk import WebClient

from agent_runtime import Actor, Approval
from agent_runtime.exceptions import (
    ApprovalNotFound,
    GrantNotFound,
    GrantRefused,
    InvalidConfiguration,
    UnsafeJson,
)
from agent_runtime.grant_service import GrantResult, Grants
from agent_runtime.grants import GrantScope
from agent_runtime.json_limits import strict_loads
from agent_runtime.rules import parse_predicate
from bot.slack.blocks import parse_approval_ref
from bot.slack.grant_blocks import day_modal
from bot.slack.guard import MAX_ARGS_DEPTH, is_approval_id, too_deep
from bot.slack.home import from_home, marked, unmarked
from bot.slack.payloads import actor_of, click, input_value
from bot.slack.reconnect import BEFORE_ACK
from bot.slack.text import escape

Tell = Callable[[dict[str, Any], Actor, str], None]
"""Tells the clicker something, where they clicked."""
Visible = Callable[[dict[str, Any], str, Actor], Approval | None]
"""Returns the approval if the clicker may see it there (else tells them)."""
OpenModal = Callable[[dict[str, Any], Actor, WebClient, dict[str, Any]], None]
Submit = Callable[[dict[str, Any], Callable[[dict[str, Any]], None], str], None]
"""Runs a click's work after the ack, off the listener thread."""
Refresh = Callable[[dict[str, Any], Actor], None]
"""Publishes the Home tab again after a submission from a modal opened there."""


@dataclass(frozen=True, slots=True)
class GrantListeners:
    """Grant clicks: each acks, parses, calls one ``Grants`` method, and answers."""

    grants: Grants
    tell: Tell
    visible: Visible
    open_modal: OpenModal
    submit: Submit
    refresh_home: Refresh

    def approve_for_run(self, ack: Ack, body: dict[str, Any]) -> None:
        """Approve and allow similar calls for the rest of the run."""
        ack()
        self.submit(body, self._approve_for_run, "grant")

    def _approve_for_run(self, body: dict[str, Any]) -> None:
        value, actor = click(body)
        approval_id, seen_hash = parse_approval_ref(value)
        approval = self.visible(body, approval_id, actor)
        if approval is None:
            return
        try:
            result = self.grants.approve_and_grant(
                approval.id, actor, GrantScope.RUN, seen_hash=seen_hash or ""
            )
        except GrantRefused as exc:
            self.tell(body, actor, f"Not recorded: {escape(exc.message)}.")
            return
        if result.grant is None:
            self.tell(body, actor, f"Not recorded: {escape(result.decision.message)}.")

    def open_day(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Show what a 24-hour grant would allow, before it is made."""
        ack()
        value, actor = click(body)
        approval = self.visible(body, parse_approval_ref(value)[0], actor)
        if approval is None:
            return
        refusal = self.grants.may_grant(approval, actor, GrantScope.DAY)
        refusal = refusal or self.grants.approvals.refusal_for(approval.id, actor)
        if refusal is not None:
            self.tell(body, actor, f"Sorry: {escape(refusal)}.")
            return
        offer = self.grants.offer(approval, actor, GrantScope.DAY)
        modal = day_modal(offer, value)
        self.open_modal(body, actor, client, marked(modal) if from_home(body) else modal)

    def submit_day(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The 24-hour modal's submit: the predicate as shown (or narrowed) becomes the grant."""
        text = input_value(view, "predicate")
        try:
            if too_deep(text):
                raise InvalidConfiguration(f"the predicate nests deeper than {MAX_ARGS_DEPTH}")
            when = parse_predicate(strict_loads(text, max_depth=MAX_ARGS_DEPTH), "the predicate")
        except UnsafeJson as exc:
            ack(response_action="errors", errors={"predicate": f"Refused: it holds {exc.problem}."})
            return
        except (json.JSONDecodeError, InvalidConfiguration) as exc:
            ack(response_action="errors", errors={"predicate": str(exc)[:300]})
            return
        metadata, home = unmarked(str(view.get("private_metadata")))
        approval_id, seen_hash = parse_approval_ref(metadata)
        actor = actor_of(body)
        try:
            if not is_approval_id(approval_id):
                raise ApprovalNotFound(approval_id[:40])
            result: GrantResult = BEFORE_ACK.call(
                lambda: self.grants.approve_and_grant(
                    approval_id, actor, GrantScope.DAY, seen_hash=seen_hash or "", when=when
                )
            )
        except (GrantRefused, ApprovalNotFound) as exc:
            ack(response_action="errors", errors={"predicate": str(exc)[:300]})
            return
        if result.grant is None:
            ack(response_action="errors", errors={"predicate": result.decision.message})
            return
        ack()
        if home:
            self.refresh_home(body, actor)

    def revoke(self, ack: Ack, body: dict[str, Any]) -> None:
        """Revoke a grant from its message: it stops deciding at once, on every instance."""
        ack()
        self.submit(body, self._revoke, "grant_revoke")

    def _revoke(self, body: dict[str, Any]) -> None:
        grant_id, actor = click(body)
        try:
            self.grants.revoke(grant_id[:40], actor)
        except (GrantRefused, GrantNotFound) as exc:
            self.tell(body, actor, f"Sorry: {escape(str(exc))}.")
