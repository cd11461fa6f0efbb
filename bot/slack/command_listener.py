"""``/agent``: start a run (acknowledged first, created after the ack) or answer a question.

The run a command starts is promised in the acknowledgement: its id comes from the
request's signature, recorded by the replay guard before the listener runs, and the sweep
creates it if this process cannot (``bot.slack.intake``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import Ack, BoltContext

from agent_runtime import Actor, AgentInput, RunId, SignoffError, StoreUnavailable
from bot.slack.app_deps import SlackDeps
from bot.slack.commands import (
    HELP,
    BadCommand,
    CancelRun,
    Command,
    ListPending,
    ListRuns,
    ShowHelp,
    ShowHistory,
    ShowStatus,
    StartRun,
    parse,
)
from bot.slack.intake import CONTEXT_KEY, Intake, carry_out, run_id_for
from bot.slack.payloads import command_actor
from bot.slack.reconnect import AFTER_ACK
from bot.slack.respond import respond
from bot.slack.text import escape
from bot.slack.views import history_message, list_text, pending_text, status_text
from bot.slack.visibility import RunAccess

logger = logging.getLogger(__name__)

Submit = Callable[..., Any]
"""Runs work after the ack, off the listener's thread."""


class CommandListener:
    """The ``/agent`` listener and the intake the replay guard records for it."""

    def __init__(self, deps: SlackDeps, access: RunAccess, submit: Submit) -> None:
        self.deps = deps
        self._access = access
        self._submit = submit

    def intake_of(self, body: dict[str, Any], signature: str) -> Intake | None:
        """The run ``/agent <task>`` will be acknowledged for (None for other requests)."""
        if not isinstance(body, dict) or body.get("command") != "/agent":
            return None
        try:
            parsed = parse(str(body.get("text", "")))
            if not isinstance(parsed, StartRun):
                return None
            workflow, data = self._agent_input(parsed.task, command_actor(body), body)
        except (BadCommand, SignoffError):
            return None  # the listener answers these as usual
        return Intake(signature, run_id_for(signature), workflow, data)

    def command(self, ack: Ack, command: dict[str, Any], context: BoltContext) -> None:
        """``/agent …``: start a run or answer a question, always within Slack's 3 s."""
        try:
            parsed = parse(command.get("text", ""))
        except BadCommand as exc:
            ack(response_type="ephemeral", text=str(exc))
            return
        intake = context.get(CONTEXT_KEY)
        if isinstance(parsed, StartRun) and isinstance(intake, Intake):
            self._start_after_ack(ack, intake, command)
            return
        try:
            if isinstance(parsed, ShowHistory):
                self._access.check_visible(
                    parsed.run_id, command_actor(command), command.get("channel_id", "")
                )
                text, history = history_message(self.deps.runtime, parsed.run_id)
                ack(response_type="ephemeral", text=text, blocks=history)
                return
            ack(response_type="ephemeral", text=self._answer(parsed, command))
        except SignoffError as exc:
            ack(response_type="ephemeral", text=f"Sorry: {escape(str(exc))}")

    def _answer(self, parsed: Command, command: dict[str, Any]) -> str:
        actor = command_actor(command)
        runtime, channel = self.deps.runtime, command.get("channel_id", "")
        match parsed:
            case StartRun(task=task):
                return self._start(task, actor, command)
            case ShowHelp():
                return HELP
            case ShowStatus(run_id=run_id):
                if run_id is not None:
                    self._access.check_visible(run_id, actor, channel)
                return status_text(runtime, run_id, actor)
            case ListRuns():
                return list_text(runtime, channel, actor)
            case ListPending():
                return pending_text(self.deps.approvals, actor)
            case ShowHistory(run_id=run_id):
                self._access.check_visible(run_id, actor, channel)
                return history_message(runtime, run_id)[0]
            case CancelRun(run_id=run_id):
                return self._cancel(run_id, actor, channel)

    def _cancel(self, run_id: RunId, actor: Actor, channel: str) -> str:
        self._access.check_visible(run_id, actor, channel)
        self._access.check_control(self.deps.runtime.get(run_id), actor, "cancel")
        self.deps.runtime.cancel(run_id, by=actor)
        return f"Cancelled run `{run_id}`."

    def _agent_input(self, task: str, actor: Actor, command: dict[str, Any]) -> tuple[str, Any]:
        """The workflow and input of the run ``/agent <task>`` starts."""
        agent = self.deps.agents.get()
        # the response_url reaches the requester even where the bot cannot post
        context = {
            "slack": {
                "channel": command.get("channel_id", ""),
                "team": command.get("team_id", ""),
                "enterprise": command.get("enterprise_id") or "",
                "response_url": command.get("response_url", ""),
            }
        }
        return agent.workflow, AgentInput(task=task, requester=actor, context=context).to_json()

    def _start(self, task: str, actor: Actor, command: dict[str, Any]) -> str:
        """Start the run before answering (a request with no recorded intake: Socket Mode)."""
        run = self.deps.runtime.start(*self._agent_input(task, actor, command))
        return started_text(run.id)

    def _start_after_ack(self, ack: Ack, intake: Intake, command: dict[str, Any]) -> None:
        """Answer with the promised run's id, then start it; the sweep does it if this fails."""
        ack(response_type="ephemeral", text=started_text(intake.run_id))
        self._submit(self._carry_out, intake, command)

    def _carry_out(self, intake: Intake, command: dict[str, Any]) -> None:
        try:
            started = AFTER_ACK.call(
                lambda: carry_out(self.deps.runtime, self.deps.replays, intake)
            )
        except StoreUnavailable:
            self._not_started_yet(intake, command)
        except SignoffError as exc:
            logger.warning(
                "run refused after the ack", extra={"action": "intake", "run_id": intake.run_id}
            )
            respond(command, f"Sorry: run `{intake.run_id}` could not start: {escape(str(exc))}")
        except Exception:
            self._not_started_yet(intake, command)
        else:
            if started:
                logger.info(
                    "acknowledged run started after its ack",
                    extra={"action": "intake", "run_id": intake.run_id},
                )

    def _not_started_yet(self, intake: Intake, command: dict[str, Any]) -> None:
        """Log the failure in hand and tell the requester the run will start later (the
        sweep retries it)."""
        logger.exception(
            "run not started after the ack; the sweep retries it",
            extra={"action": "intake", "run_id": intake.run_id},
        )
        respond(
            command,
            f"Signoff could not start run `{intake.run_id}` yet; "
            "it retries within a minute, and the thread shows when it starts.",
        )


def started_text(run_id: RunId) -> str:
    """The acknowledgement of a started run."""
    return f"Started run `{run_id}`; follow it in the thread below."
