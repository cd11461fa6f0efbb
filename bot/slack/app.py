"""The Bolt app: thin listeners that ack, validate, record and enqueue.

Each listener acknowledges at once, parses the request into a typed command, calls one
function, and answers. Nothing here runs agent work: decisions are a compare-and-set in
the database and every message to Slack goes through the outbox.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from slack_bolt import Ack, App, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from agent_runtime import (
    Actor,
    AgentInput,
    Agents,
    Approval,
    Approvals,
    Clock,
    Decision,
    InvalidInput,
    Run,
    RunId,
    RunNotFound,
    Runtime,
    SignoffError,
    StoreUnavailable,
    parse_run_id,
)
from agent_runtime.agent_loop import ModelResolver, with_model
from agent_runtime.budget_control import NotAllowed
from agent_runtime.exceptions import ApprovalNotFound
from agent_runtime.forking import fork_run
from agent_runtime.notices import Notice, Outbox
from agent_runtime.proposal import Proposal, proposal
from bot.slack import blocks
from bot.slack.batch_blocks import (
    APPROVE_ALL,
    REJECT_ALL,
    REJECT_ALL_SUBMIT,
    parse_batch,
    reject_all_modal,
)
from bot.slack.batch_decisions import (
    BatchOutcome,
    approve_batch,
    refusals,
    reject_batch,
    waiting,
)
from bot.slack.commands import HELP, BadCommand, Command, parse
from bot.slack.guard import MAX_ARGS_DEPTH, guard_errors, is_approval_id, too_deep
from bot.slack.notifier import EPHEMERAL, slack_context
from bot.slack.reconnect import AFTER_ACK, BEFORE_ACK
from bot.slack.respond import respond
from bot.slack.text import escape
from bot.slack.views import history_message, list_text, pending_text, status_text
from bot.slack.why import why_modal

logger = logging.getLogger(__name__)

DECISION_THREADS = 4


class ReplayGuard(Protocol):
    """Remembers signatures of handled requests."""

    def first_time(self, signature: str, now: datetime) -> bool:
        """Record ``signature``; False if it was seen before."""
        ...


@dataclass(frozen=True, slots=True)
class SlackDeps:
    """What the listeners use."""

    runtime: Runtime
    approvals: Approvals
    agents: Agents
    outbox: Outbox
    clock: Clock
    replays: ReplayGuard
    models: ModelResolver | None = None
    """Resolves the model a run names, to rebuild what that model saw ("Why?")."""


def build_app(deps: SlackDeps, client: WebClient, signing_secret: str) -> App:
    """Return the Bolt app with every listener registered."""
    app = App(
        client=client,
        signing_secret=signing_secret,
        token_verification_enabled=False,
        ignoring_self_events_enabled=True,
        request_verification_enabled=True,
    )
    app.middleware(_drop_retries)
    app.middleware(_refuse_replays(deps))
    app.error(guard_errors)
    listeners = Listeners(deps)
    app.command("/agent")(listeners.command)
    app.action(blocks.APPROVE)(listeners.approve)
    app.action(blocks.REJECT)(listeners.open_reject)
    app.action(blocks.EDIT)(listeners.open_edit)
    app.action(blocks.VIEW_ARGS)(listeners.view_args)
    app.action(blocks.WHY)(listeners.why)
    app.action(APPROVE_ALL)(listeners.approve_all)
    app.action(REJECT_ALL)(listeners.open_reject_all)
    app.action(blocks.HISTORY)(listeners.history)
    app.action(blocks.FORK)(listeners.fork)
    app.view("approval.reject_submit")(listeners.submit_reject)
    app.view("approval.edit_submit")(listeners.submit_edit)
    app.view(REJECT_ALL_SUBMIT)(listeners.submit_reject_all)
    return app


def _drop_retries(request: Any, next: Callable[[], BoltResponse]) -> BoltResponse:
    """Acknowledge Slack's retries of events without handling them twice."""
    if request.headers.get("x-slack-retry-num"):
        return BoltResponse(status=200, body="")
    return next()


def _refuse_replays(deps: SlackDeps) -> Callable[..., BoltResponse]:
    """Refuse a (validly signed) request whose exact signature was already handled."""

    def middleware(request: Any, next: Callable[[], BoltResponse]) -> BoltResponse:
        signature = (request.headers.get("x-slack-signature") or [""])[0]
        if signature and not BEFORE_ACK.call(
            lambda: deps.replays.first_time(signature, deps.clock.now())
        ):
            logger.warning("replayed request refused", extra={"action": "replay"})
            return BoltResponse(status=401, body='{"error": "replayed request"}')
        return next()

    return middleware


class Listeners:
    """The handlers for ``/agent``, the card buttons and the modals."""

    def __init__(self, deps: SlackDeps) -> None:
        self.deps = deps
        # Decisions wait on database locks; taking them off Bolt's small listener pool keeps
        # a burst of clicks from delaying the acks of the clicks behind them.
        self._decisions = ThreadPoolExecutor(DECISION_THREADS, thread_name_prefix="signoff-decide")

    def command(self, ack: Ack, command: dict[str, Any]) -> None:
        """``/agent …``: start a run or answer a question, always within Slack's 3 s."""
        try:
            parsed = parse(command.get("text", ""))
        except BadCommand as exc:
            ack(response_type="ephemeral", text=str(exc))
            return
        try:
            if parsed.name == "history":
                assert parsed.run_id is not None
                self._check_visible(
                    parsed.run_id, _actor_of_command(command), command.get("channel_id", "")
                )
                text, history = history_message(self.deps.runtime, parsed.run_id)
                ack(response_type="ephemeral", text=text, blocks=history)
                return
            ack(response_type="ephemeral", text=self._answer(parsed, command))
        except SignoffError as exc:
            ack(response_type="ephemeral", text=f"Sorry: {escape(str(exc))}")

    def _answer(self, parsed: Command, command: dict[str, Any]) -> str:
        actor = _actor_of_command(command)
        runtime = self.deps.runtime
        if parsed.name == "run":
            return self._start(parsed.task, actor, command)
        if parsed.name == "help":
            return HELP
        if parsed.name == "status":
            if parsed.run_id is not None:
                self._check_visible(parsed.run_id, actor, command.get("channel_id", ""))
            return status_text(runtime, parsed.run_id, actor)
        if parsed.name == "list":
            return list_text(runtime, command.get("channel_id", ""))
        if parsed.name == "pending":
            return pending_text(self.deps.approvals, actor)
        assert parsed.run_id is not None
        return self._cancel(parsed.run_id, actor, command.get("channel_id", ""))

    def _cancel(self, run_id: RunId, actor: Actor, channel: str) -> str:
        self._check_visible(run_id, actor, channel)
        self._check_control(self.deps.runtime.get(run_id), actor, "cancel")
        self.deps.runtime.cancel(run_id, by=actor)
        return f"Cancelled run `{run_id}`."

    def _check_visible(self, run_id: RunId, actor: Actor, channel: str) -> None:
        """A run is shown in the channel it was started from, and anywhere to the person who
        started it and its approvers; to anyone else it does not exist."""
        run = self.deps.runtime.get(run_id)
        started_here = (slack_context(run) or {}).get("channel") == channel
        if not started_here and not self._may_control(run, actor):
            raise RunNotFound(run_id)

    def _may_control(self, run: Run, actor: Actor) -> bool:
        requester = (run.input.get("requester") or {}) if isinstance(run.input, dict) else {}
        agent = self.deps.agents.for_workflow(run.workflow)
        return requester.get("user_id") == actor.user_id or (
            agent is not None and agent.may_raise_budget(actor.user_id)
        )

    def _check_control(self, run: Run, actor: Actor, verb: str) -> None:
        """Only the person who started a run, or its approvers, may cancel or fork it."""
        if not self._may_control(run, actor):
            raise NotAllowed(f"only the person who started a run or its approvers may {verb} it")

    def _start(self, task: str, actor: Actor, command: dict[str, Any]) -> str:
        agent = self.deps.agents.get()
        # the response_url reaches the requester even where the bot cannot post
        context = {
            "slack": {
                "channel": command.get("channel_id", ""),
                "team": command.get("team_id", ""),
                "response_url": command.get("response_url", ""),
            }
        }
        data = AgentInput(task=task, requester=actor, context=context).to_json()
        run = self.deps.runtime.start(agent.workflow, data)
        return f"Started run `{run.id}`; follow it in the thread below."

    def approve(self, ack: Ack, body: dict[str, Any]) -> None:
        """Approve: a compare-and-set; a refusal is told to the clicker only."""
        ack()
        self._decisions.submit(self._after_ack, body, self._approve, "approve")

    def _after_ack(
        self, body: dict[str, Any], work: Callable[[dict[str, Any]], None], action: str
    ) -> None:
        """Carry an acknowledged click through database reconnects; if it still cannot be
        done, tell the clicker so through the click's ``response_url``."""
        try:
            AFTER_ACK.call(lambda: work(body))
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
        self._tell(body, actor, result.message)

    def approve_all(self, ack: Ack, body: dict[str, Any]) -> None:
        """Approve all: each call of the batch approved for the arguments its card showed."""
        ack()
        self._decisions.submit(self._after_ack, body, self._approve_all, "approve_all")

    def _approve_all(self, body: dict[str, Any]) -> None:
        value, actor = _click(body)
        refs = dict(blocks.parse_approval_ref(ref) for ref in parse_batch(value))
        batch = self._visible_batch(body, list(refs), actor)
        if batch is not None:
            outcome = approve_batch(self.deps.approvals, [(a, refs[a.id]) for a in batch], actor)
            self._tell(body, actor, outcome.summary())

    def open_reject_all(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Reject all: ask for one reason in a modal, if the clicker may decide every call."""
        ack()
        value, actor = _click(body)
        batch = self._visible_batch(body, parse_batch(value), actor)
        if batch is None:
            return
        refused = refusals(self.deps.approvals, batch, actor)
        if refused:
            self._tell(body, actor, BatchOutcome(refused=refused).summary())
            return
        self._open(body, actor, client, reject_all_modal([a.id for a in waiting(batch)]))

    def submit_reject_all(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        """The reject-all modal's submit: one reason, each call rejected on its own."""
        reason = _value(view, "reason")
        if not reason.strip():
            ack(response_action="errors", errors={"reason": "Give the agent a reason."})
            return
        ids = [i for i in parse_batch(str(view.get("private_metadata"))) if is_approval_id(i)]
        actor = _actor(body["user"])
        outcome = BEFORE_ACK.call(
            lambda: reject_batch(
                self.deps.approvals, [self.deps.approvals.get(i) for i in ids], actor, reason
            )
        )
        if outcome.decided or not outcome.refused:
            ack()
        else:
            ack(response_action="errors", errors={"reason": outcome.summary()[:300]})

    def _visible_batch(
        self, body: dict[str, Any], approval_ids: list[str], actor: Actor
    ) -> list[Approval] | None:
        """Return a batch's approvals (of one run) if ``actor`` may see them; else tell them."""
        batch = []
        for approval_id in approval_ids:
            approval = self._visible_approval(body, approval_id, actor)
            if approval is None:
                return None
            batch.append(approval)
        if len({a.run_id for a in batch}) != 1:
            self._tell(body, actor, "Sorry: there is no such batch of approvals.")
            return None
        return batch

    def _visible_approval(
        self, body: dict[str, Any], approval_id: str, actor: Actor
    ) -> Approval | None:
        """Return the approval if ``actor`` may see it where they clicked; else tell them."""
        try:
            if not is_approval_id(approval_id):
                raise ApprovalNotFound(approval_id[:40])
            approval = self.deps.approvals.get(approval_id)
            if actor.user_id not in _people_of(approval):
                self._check_visible(parse_run_id(approval.run_id), actor, _channel_of(body))
        except (ApprovalNotFound, RunNotFound):
            self._tell(body, actor, "Sorry: there is no such approval, or it is not yours to see.")
            return None
        return approval

    def open_reject(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Reject: ask for the reason in a modal (if the clicker may decide at all)."""
        ack()
        self._open_if_allowed(body, client, lambda approval_id: blocks.reject_modal(approval_id))

    def open_edit(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Edit: show the arguments in a modal (if the clicker may decide at all)."""
        ack()
        self._open_if_allowed(
            body,
            client,
            lambda approval_id: blocks.edit_modal(self.deps.approvals.get(approval_id)),
        )

    def view_args(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Show the full arguments of a card (to whoever may see the approval there)."""
        ack()
        value, actor = _click(body)
        approval = self._visible_approval(body, blocks.parse_approval_ref(value)[0], actor)
        if approval is not None:
            self._open(body, actor, client, blocks.args_modal(approval))

    def why(self, ack: Ack, body: dict[str, Any], client: WebClient) -> None:
        """Show the model step that proposed a card's call (to whoever may see the card)."""
        ack()
        value, actor = _click(body)
        approval = self._visible_approval(body, blocks.parse_approval_ref(value)[0], actor)
        if approval is None:
            return
        try:
            reasons = self._proposal(approval)
        except SignoffError as exc:
            self._tell(body, actor, f"Sorry: {escape(str(exc))}")
            return
        self._open(body, actor, client, why_modal(approval, reasons))

    def _proposal(self, approval: Approval) -> Proposal:
        run = self.deps.runtime.get(parse_run_id(approval.run_id))
        agent = self.deps.agents.for_workflow(run.workflow)
        if agent is None:
            raise InvalidInput("why", f"run {run.id} is not an agent run")
        spec = run.input.get("model") if isinstance(run.input, dict) else None
        return proposal(
            with_model(agent, spec, self.deps.models),
            self.deps.approvals,
            run,
            self.deps.runtime.journal(run.id),
            approval.position,
        )

    def history(self, ack: Ack, body: dict[str, Any]) -> None:
        """Post the run's compact timeline to the clicker."""
        ack()
        run_id, actor = _click(body)
        try:
            self._check_visible(parse_run_id(run_id), actor, _channel_of(body))
        except SignoffError as exc:
            self._tell(body, actor, f"Sorry: {escape(str(exc))}")
            return
        text, history = history_message(self.deps.runtime, parse_run_id(run_id))
        self._tell(body, actor, text, history)

    def fork(self, ack: Ack, body: dict[str, Any]) -> None:
        """ "Fork from here": a new run from the run's journal up to that model call."""
        ack()
        value, actor = _click(body)
        source, _, position = value.partition(":")
        try:
            self._check_visible(parse_run_id(source), actor, _channel_of(body))
            run = self.deps.runtime.get(parse_run_id(source))
            self._check_control(run, actor, "fork")
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
            edited = json.loads(text)
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
        approval_id, seen_hash = blocks.parse_approval_ref(str(view.get("private_metadata")))
        actor = _actor(body["user"])
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
        if result.accepted or _own_decision(result.approval, actor):
            ack()
        else:
            ack(response_action="errors", errors={block: result.message})

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
        self._open(body, actor, client, modal(approval.id))

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
        channel = _channel_of(body)
        if not channel:
            return
        container = body.get("container") or {}
        notice = Notice(
            key=f"ephemeral:{body.get('trigger_id') or self.deps.clock.now()}",
            run_id=None,
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


def _own_decision(approval: Approval, actor: Actor) -> bool:
    """Tell whether ``actor``'s own decision closed the approval (a retried click's case)."""
    return approval.decided_by is not None and approval.decided_by.user_id == actor.user_id


def _people_of(approval: Approval) -> set[str]:
    """Who may see an approval anywhere: its requester and everyone who may decide it."""
    policy = approval.policy
    return {
        approval.requester.user_id,
        *policy.get("approvers", ()),
        *policy.get("escalate_to", ()),
    }


def _channel_of(body: dict[str, Any]) -> str:
    return str(
        (body.get("channel") or {}).get("id")
        or (body.get("container") or {}).get("channel_id")
        or ""
    )


def _click(body: dict[str, Any]) -> tuple[str, Actor]:
    return str(body["actions"][0]["value"]), _actor(body["user"])


def _actor(user: dict[str, Any]) -> Actor:
    return Actor(
        user_id=user["id"],
        team_id=user.get("team_id", ""),
        name=user.get("username") or user.get("name") or "",
    )


def _actor_of_command(command: dict[str, Any]) -> Actor:
    return Actor(
        user_id=command.get("user_id", ""),
        team_id=command.get("team_id", ""),
        name=command.get("user_name", ""),
    )


def _value(view: dict[str, Any], block: str) -> str:
    field = (((view.get("state") or {}).get("values") or {}).get(block) or {}).get("value")
    value = field.get("value") if isinstance(field, dict) else None
    return value if isinstance(value, str) else ""


__all__ = ["SlackDeps", "build_app"]
