"""The Bolt app: thin listeners that ack, validate, record and enqueue.

Each listener acknowledges at once, parses the request into a typed command, calls one
function, and answers. Nothing here runs agent work: decisions are a compare-and-set in
the database and every message to Slack goes through the outbox.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, App
from slack_bolt.logger.messages import (
    warning_client_prioritized_and_token_skipped,
    warning_token_skipped,
)
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime import (
    Actor,
    Approval,
    Decision,
    InvalidInput,
    RunNotFound,
    SignoffError,
    StoreUnavailable,
    parse_run_id,
)
from agent_runtime.exceptions import ApprovalNotFound, UnsafeJson
from agent_runtime.forking import fork_run
from agent_runtime.json_limits import strict_loads
from agent_runtime.notices import Notice
from bot.slack import blocks
from bot.slack.ack_gate import AckGate
from bot.slack.after_ack import AfterAck
from bot.slack.allowed import AllowedWorkspaces, refuse_other_workspaces
from bot.slack.app_deps import SlackDeps
from bot.slack.batch_blocks import (
    APPROVE_ALL,
    REJECT_ALL,
    REJECT_ALL_SUBMIT,
)
from bot.slack.batch_listeners import BatchListeners
from bot.slack.budget_blocks import AMOUNT_SUBMIT, BUDGET_END, BUDGET_RAISE, CONFIRM_SUBMIT
from bot.slack.budget_listeners import BudgetListeners
from bot.slack.command_listener import CommandListener
from bot.slack.grant_blocks import DAY_SUBMIT, GRANT_REVOKE
from bot.slack.grant_listeners import GrantListeners
from bot.slack.guard import MAX_ARGS_DEPTH, guard_errors, is_approval_id, too_deep
from bot.slack.home import from_home, marked, unmarked
from bot.slack.home_listener import HomeListener
from bot.slack.middleware import drop_retries, refuse_replays
from bot.slack.notifier import EPHEMERAL
from bot.slack.oauth import BoltAuth, single_workspace
from bot.slack.payloads import actor_of as _actor
from bot.slack.payloads import channel_of
from bot.slack.payloads import click as _click
from bot.slack.payloads import input_value as _value
from bot.slack.reconnect import AFTER_ACK, BEFORE_ACK
from bot.slack.respond import respond
from bot.slack.text import escape
from bot.slack.uninstalls import Uninstalls
from bot.slack.views import history_message
from bot.slack.visibility import RunAccess, may_see, own_decision
from bot.slack.why_listener import WhyListener

logger = logging.getLogger(__name__)


class _TokenFromTheEnvironment(logging.Filter):
    """Drops Bolt's warning that the client it is given wins over ``SLACK_BOT_TOKEN``, which
    Bolt reads from the environment itself: the app is always given its client (and its
    ``authorize``) on purpose, so the warning at every start would only alarm."""

    skipped = frozenset({warning_client_prioritized_and_token_skipped(), warning_token_skipped()})

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() not in self.skipped


logging.getLogger("slack_bolt.App").addFilter(_TokenFromTheEnvironment())


def build_app(
    deps: SlackDeps,
    client: WebClient,
    signing_secret: str,
    *,
    auth: BoltAuth | None = None,
    uninstalls: Uninstalls | None = None,
    allowed: AllowedWorkspaces | None = None,
    after_acks: AfterAck | None = None,
) -> App:
    """Return the Bolt app with every listener registered.

    ``auth`` says how requests are authorized (by default with ``client``'s token alone);
    ``uninstalls`` handles workspaces removing the app (OAuth mode); requests from a
    workspace ``allowed`` does not admit are answered without being handled; what follows
    an ack is carried out by ``after_acks``, each piece in its turn at the gate that counts
    the process's requests in flight (by default threads of its own at a gate of their
    own, which holds nothing back, never closed).
    """
    auth = auth or single_workspace(client.token or "")
    app = App(
        client=WebClient(base_url=client.base_url, logger=client.logger),
        signing_secret=signing_secret,
        authorize=auth.authorize,
        oauth_flow=auth.oauth_flow,
        token_verification_enabled=False,
        ignoring_self_events_enabled=True,
        request_verification_enabled=True,
        # the HTTP answer goes as soon as a listener returns: listeners ack, hand what follows
        # the ack to their own pool, and return (no polling for the ack, no extra thread hop)
        process_before_response=True,
    )
    if uninstalls is not None:
        app.event("app_uninstalled")(uninstalls.app_uninstalled)
        app.event("tokens_revoked")(uninstalls.tokens_revoked)
    listeners = Listeners(deps, after_acks or AfterAck(AckGate()))
    if allowed is not None and not allowed.anyone:
        app.middleware(refuse_other_workspaces(allowed))
    app.middleware(drop_retries)
    app.middleware(refuse_replays(deps.replays, deps.clock, listeners.commands.intake_of))
    app.error(guard_errors)
    app.command("/agent")(listeners.commands.command)
    app.action(blocks.APPROVE)(listeners.approve)
    app.action(blocks.REJECT)(listeners.open_reject)
    app.action(blocks.EDIT)(listeners.open_edit)
    app.action(blocks.VIEW_ARGS)(listeners.view_args)
    app.action(blocks.HISTORY)(listeners.history)
    app.action(blocks.FORK)(listeners.fork)
    app.view("approval.reject_submit")(listeners.submit_reject)
    app.view("approval.edit_submit")(listeners.submit_edit)
    app.event("app_home_opened")(listeners.home.opened)
    tell, visible, open_modal = listeners._tell, listeners._visible_approval, listeners._open
    why = WhyListener(
        deps.runtime, deps.agents, deps.approvals, deps.models, tell, visible, open_modal
    )
    app.action(blocks.WHY)(why.why)
    batches = BatchListeners(deps.approvals, tell, visible, open_modal, listeners.later)
    app.action(APPROVE_ALL)(batches.approve_all)
    app.action(REJECT_ALL)(batches.open_reject_all)
    app.view(REJECT_ALL_SUBMIT)(batches.submit_reject_all)
    budgets = BudgetListeners(
        deps.runtime, deps.agents, deps.approvals, tell, visible, open_modal, listeners.later
    )
    app.action(BUDGET_RAISE)(budgets.open_raise)
    app.action(BUDGET_END)(budgets.end)
    app.view(AMOUNT_SUBMIT)(budgets.submit_amount)
    app.view(CONFIRM_SUBMIT)(budgets.submit_confirm)
    grants = GrantListeners(
        deps.grants, tell, visible, open_modal, listeners.later, listeners.refresh_home
    )
    app.action(blocks.GRANT_RUN)(grants.approve_for_run)
    app.action(blocks.GRANT_DAY)(grants.open_day)
    app.action(GRANT_REVOKE)(grants.revoke)
    app.view(DAY_SUBMIT)(grants.submit_day)
    return app


class Listeners:
    """The handlers for ``/agent``, the card buttons and the modals."""

    def __init__(self, deps: SlackDeps, after_acks: AfterAck) -> None:
        self.deps = deps
        self.home = HomeListener(deps.home_tabs, deps.outbox, deps.clock)
        self.access = RunAccess(deps.runtime, deps.agents)
        # What follows an ack (decisions waiting on database locks, modals waiting on Slack,
        # runs being created) runs there, so that the request's answer never waits for it.
        self._after_acks = after_acks
        self.commands = CommandListener(deps, self.access, self._after_acks.submit)

    def approve(self, ack: Ack, body: dict[str, Any]) -> None:
        """Approve: a compare-and-set; a refusal is told to the clicker only."""
        ack()
        self.later(body, self._approve, "approve")

    def later(
        self, body: dict[str, Any], work: Callable[[dict[str, Any]], None], action: str
    ) -> None:
        """Do a click's ``work`` after the ack, off the request's thread (see ``_after_ack``)."""
        self._after_acks.submit(self._after_ack, body, work, action)

    def _after_ack(
        self, body: dict[str, Any], work: Callable[[dict[str, Any]], None], action: str
    ) -> None:
        """Carry an acknowledged click through database reconnects; if it still cannot be
        done, tell the clicker so through the click's ``response_url``."""
        try:
            AFTER_ACK.call(lambda: work(body))
            if from_home(body):
                self.home.refresh(body, _actor(body))
        except StoreUnavailable:
            logger.error("click not recorded: database unavailable", extra={"action": action})
            respond(
                body,
                "Sorry: Signoff could not reach its database, so your click may not "
                "have been recorded. Check the card and try again in a minute.",
            )
        except Exception:
            logger.exception("click failed", extra={"action": action})
            respond(
                body,
                "Sorry: something went wrong and your click was not recorded. "
                "Try again; if it keeps failing, tell your Signoff operator.",
            )

    def _approve(self, body: dict[str, Any]) -> None:
        value, actor = _click(body)
        approval_id, seen_hash = blocks.parse_approval_ref(value)
        approval = self._visible_approval(body, approval_id, actor)
        if approval is None:
            return
        # a card without the hash of what it shows is from before hashes were shown: stale
        result = self.deps.approvals.decide(
            approval.id, actor, Decision.APPROVE, seen_hash=seen_hash or ""
        )
        if result.accepted:
            return
        if result.refused_as == "stale":
            text, card = blocks.approval_card(result.approval)
            self._tell(body, actor, f"Not recorded: {result.message}.\n{text}", card)
            return
        self._tell(body, actor, escape(result.message))

    def _visible_approval(
        self, body: dict[str, Any], approval_id: str, actor: Actor
    ) -> Approval | None:
        """Return the approval if ``actor`` may see it where they clicked; else tell them."""
        try:
            if not is_approval_id(approval_id):
                raise ApprovalNotFound(approval_id[:40])
            approval = self.deps.approvals.get(approval_id)
            if not may_see(approval, actor):
                self.access.check_visible(parse_run_id(approval.run_id), actor, channel_of(body))
        except (ApprovalNotFound, RunNotFound):
            self._tell(body, actor, "Sorry: there is no such approval, or it is not yours to see.")
            return None
        return approval

    def open_reject(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Reject: ask for the reason in a modal (if the clicker may decide at all)."""
        ack()
        self.later(
            body,
            lambda b: self._open_if_allowed(b, client, blocks.reject_modal),
            "open_reject",
        )

    def open_edit(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Edit: show the arguments in a modal (if the clicker may decide at all)."""
        ack()
        self.later(
            body,
            lambda b: self._open_if_allowed(
                b,
                client,
                lambda approval_id: blocks.edit_modal(self.deps.approvals.get(approval_id)),
            ),
            "open_edit",
        )

    def view_args(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Show the full arguments of a card (to whoever may see the approval there)."""
        ack()
        self.later(body, lambda b: self._view_args(b, client), "view_args")

    def _view_args(self, body: dict[str, Any], client: WebClient) -> None:
        value, actor = _click(body)
        approval = self._visible_approval(body, blocks.parse_approval_ref(value)[0], actor)
        if approval is not None:
            self._open(body, actor, client, blocks.args_modal(approval))

    def history(self, ack: Ack, body: dict[str, Any]) -> None:
        """Post the run's compact timeline to the clicker."""
        ack()
        self.later(body, self._history, "history")

    def _history(self, body: dict[str, Any]) -> None:
        run_id, actor = _click(body)
        try:
            self.access.check_visible(parse_run_id(run_id), actor, channel_of(body))
        except SignoffError as exc:
            self._tell(body, actor, f"Sorry: {escape(str(exc))}")
            return
        text, history = history_message(self.deps.runtime, parse_run_id(run_id))
        self._tell(body, actor, text, history)

    def fork(self, ack: Ack, body: dict[str, Any]) -> None:
        """ "Fork from here": a new run from the run's journal up to that model call."""
        ack()
        self.later(body, self._fork, "fork")

    def _fork(self, body: dict[str, Any]) -> None:
        value, actor = _click(body)
        source, _, position = value.partition(":")
        try:
            self.access.check_visible(parse_run_id(source), actor, channel_of(body))
            run = self.deps.runtime.get(parse_run_id(source))
            self.access.check_control(run, actor, "fork")
            forked = fork_run(self.deps.runtime, run.id, int(position), agent_run=True)
        except (SignoffError, ValueError) as exc:
            self._tell(body, actor, f"Sorry: {escape(str(exc))}")
            return
        self._tell(
            body,
            actor,
            f"Forked run `{forked.id}` from step {position} of `{run.id}`; "
            "it continues in its own thread.",
        )

    def submit_reject(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The reject modal's submit: a reason is required; refusals show in the modal."""
        reason = _value(view, "reason")
        if not reason.strip():
            ack(response_action="errors", errors={"reason": "Give the agent a reason."})
            return
        self._submit(ack, body, view, "reason", Decision.REJECT, reason=reason)

    def submit_edit(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The edit modal's submit: JSON and schema errors show in the modal."""
        text = _value(view, "args")
        if too_deep(text):
            ack(
                response_action="errors",
                errors={"args": f"The arguments nest deeper than {MAX_ARGS_DEPTH} levels."},
            )
            return
        try:
            edited = strict_loads(text, max_depth=MAX_ARGS_DEPTH)
        except UnsafeJson as exc:
            ack(response_action="errors", errors={"args": f"Refused: they hold {exc.problem}."})
            return
        except json.JSONDecodeError as exc:
            ack(response_action="errors", errors={"args": f"Not valid JSON: {exc.msg}"})
            return
        if not isinstance(edited, dict):
            ack(response_action="errors", errors={"args": "The arguments must be a JSON object."})
            return
        self._submit(ack, body, view, "args", Decision.EDIT, edited_args=edited)

    def _submit(
        self,
        ack: Ack,
        body: dict[str, Any],
        view: dict[str, Any],
        block: str,
        decision: Decision,
        **kwargs: Any,
    ) -> None:
        """Decide from a modal; every refusal or failure shows in the modal, never a 500."""
        metadata, home = unmarked(str(view.get("private_metadata")))
        approval_id, seen_hash = blocks.parse_approval_ref(metadata)
        actor = _actor(body)
        try:
            if not is_approval_id(approval_id):
                raise ApprovalNotFound(approval_id[:40])
            result = BEFORE_ACK.call(
                lambda: self.deps.approvals.decide(
                    approval_id, actor, decision, seen_hash=seen_hash, **kwargs
                )
            )
        except InvalidInput as exc:
            ack(response_action="errors", errors={block: exc.detail[:300]})
            return
        except ApprovalNotFound:
            ack(response_action="errors", errors={block: "There is no such approval."})
            return
        except StoreUnavailable:
            ack(
                response_action="errors",
                errors={
                    block: "Signoff could not reach its "
                    "database, so nothing was recorded. Submit again in a moment."
                },
            )
            return
        if result.accepted or own_decision(result.approval, actor):
            ack()
            if home:
                self.refresh_home(body, actor)
        else:
            ack(response_action="errors", errors={block: result.message})

    def refresh_home(self, body: dict[str, Any], actor: Actor) -> None:
        """Publish ``actor``'s Home tab again after their submission ``body`` of a modal
        opened there (off the listener's thread: the submission is answered at once)."""
        self._after_acks.submit(self.home.refresh, body, actor)

    def _open_if_allowed(
        self, body: dict[str, Any], client: WebClient, modal: Callable[[str], dict[str, Any]]
    ) -> None:
        value, actor = _click(body)
        approval = self._visible_approval(body, blocks.parse_approval_ref(value)[0], actor)
        if approval is None:
            return
        refusal = self.deps.approvals.refusal_for(approval.id, actor)
        if refusal is not None:
            self._tell(body, actor, refusal)
            return
        opened = modal(approval.id)
        self._open(body, actor, client, marked(opened) if from_home(body) else opened)

    def _open(
        self, body: dict[str, Any], actor: Actor, client: WebClient, view: dict[str, Any]
    ) -> None:
        """Open a modal; if Slack refuses (an expired trigger, say), tell the clicker."""
        try:
            client.views_open(trigger_id=body["trigger_id"], view=view)
        except (SlackApiError, OSError) as exc:
            error = exc.response.get("error") if isinstance(exc, SlackApiError) else None
            logger.warning("views.open failed", extra={"action": "views_open"})
            self._tell(
                body,
                actor,
                "Sorry: Slack did not open the dialog "
                f"({escape(str(error or 'network error'))}). "
                "Click the button again.",
            )

    def _tell(
        self,
        body: dict[str, Any],
        actor: Actor,
        text: str,
        layout: list[blocks.Block] | None = None,
    ) -> None:
        """Tell the clicker only: on the Home tab if they clicked there, else ephemerally."""
        if from_home(body):
            self.home.refresh(body, actor, text)
            return
        channel = channel_of(body)
        if not channel:
            return
        container = body.get("container") or {}
        notice = Notice(
            key=f"ephemeral:{body.get('trigger_id') or self.deps.clock.now()}",
            run_id=None,
            team_id=actor.team_id,
            enterprise_id=actor.enterprise_id,
            kind=EPHEMERAL,
            data={
                "channel": channel,
                "user": actor.user_id,
                "text": text,
                "thread_ts": container.get("thread_ts"),
                "blocks": layout,
            },
        )
        self.deps.outbox.enqueue([notice], self.deps.clock.now())


__all__ = ["SlackDeps", "build_app"]
