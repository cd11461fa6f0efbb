"""Which Slack notices each change causes, for runs started from Slack."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from agent_runtime import (
    AgentInput,
    Approval,
    ApprovalStatus,
    Run,
    RunId,
    RunNotFound,
    RunStatus,
    StepRecord,
    Store,
)
from agent_runtime.approvals import ApprovalKind, local_people
from agent_runtime.grants import Grant
from agent_runtime.notices import Notice
from agent_runtime.records import StepKind
from agent_runtime.rule_decisions import AUTOMATIC_ACTOR_PREFIXES
from agent_runtime.step_names import (
    AS_DECIDED,
    BUDGET_EXHAUSTED,
    MODEL,
    TOOL,
    TOOL_STARTED,
    TOOL_UNKNOWN_OUTCOME,
    tool_of,
)
from bot.slack.blocks import decision_line
from bot.slack.budget_blocks import decided_line, ended_line
from bot.slack.home_refreshes import approval_refreshes, grant_refreshes, run_refreshes
from bot.slack.text import message, shown, tool_name

ROOT, REPLY, CARD, DM, CARD_UPDATE, EPHEMERAL, ROOT_UPDATE, BATCH = (
    "run.root",
    "run.reply",
    "approval.card",
    "approval.dm",
    "approval.update",
    "ephemeral",
    "run.root.update",
    "approval.batch",
)
GRANT, GRANT_UPDATE = "grant.message", "grant.update"
REPLY_LIMIT = 600
PLANS_SHOWN = 10
"""The planned tool calls a reply names before summing up the rest."""


def slack_context(run: Run) -> dict[str, Any] | None:
    """Return the Slack channel and team a run was started from, if it was."""
    data = run.input if isinstance(run.input, dict) else {}
    found = (data.get("context") or {}).get("slack")
    return found if isinstance(found, dict) and found.get("channel") else None


def in_workspace(run: Run, notices: Sequence[Notice]) -> list[Notice]:
    """The notices addressed to the Slack workspace (and Grid organization) the run is from."""
    return in_place(slack_context(run), notices)


def in_place(where: dict[str, Any] | None, notices: Sequence[Notice]) -> list[Notice]:
    """The notices addressed to the workspace of a run's Slack context ``where``."""
    where = where or {}
    team, enterprise = str(where.get("team") or ""), str(where.get("enterprise") or "")
    return [replace(n, team_id=team, enterprise_id=enterprise) for n in notices]


def root_fields(run: Run) -> dict[str, Any]:
    """What the root message says of a run besides its status: task, requester, agent, fork."""
    data = AgentInput.of(run.input)
    return {
        "task": "" if data is None else data.task,
        "requester": "" if data is None else data.requester.user_id,
        "agent": run.workflow.removeprefix("agent:"),
        "fork": None if run.forked_from is None else {"from": run.forked_from, "at": run.fork_at},
    }


def root_key(run_id: str) -> str:
    """The key of a run's root message."""
    return f"run:{run_id}:root"


def card_key(approval_id: str, user: str | None = None) -> str:
    """The key of an approval's card in the thread, or in ``user``'s DM."""
    return f"approval:{approval_id}:card" + (f":dm:{user}" if user else "")


PLACES_KEPT = 10_000
"""How many runs' Slack places a notifier remembers (a run's input never changes)."""


class SlackNotifier:
    """Implements ``agent_runtime.notices.Notifier`` for runs started from Slack."""

    def __init__(self, runs: Store) -> None:
        self._runs = runs
        self._places: dict[str, dict[str, Any] | None] = {}

    def _place(self, run_id: str) -> dict[str, Any] | None:
        """The Slack channel a run was started from, read once per run (raises RunNotFound)."""
        if run_id in self._places:
            return self._places[run_id]
        return self._remember(run_id, slack_context(self._runs.get_run(RunId(run_id))))

    def _remember(self, run_id: str, where: dict[str, Any] | None) -> dict[str, Any] | None:
        if len(self._places) >= PLACES_KEPT:
            self._places.clear()
        self._places[run_id] = where
        return where

    def run_started(self, run: Run) -> Sequence[Notice]:
        """Post the run's root message; refresh the requester's Home tab."""
        where = self._remember(run.id, slack_context(run))
        if where is None:
            return ()
        root = Notice(
            key=root_key(run.id),
            run_id=run.id,
            kind=ROOT,
            data={"channel": where["channel"]} | root_fields(run),
        )
        return [*in_place(where, [root]), *run_refreshes(run, where)]

    def step_committed(self, run: Run, step: StepRecord) -> Sequence[Notice]:
        """A concise thread reply for the steps a person cares about."""
        if slack_context(run) is None or step.kind != StepKind.STEP:
            return ()
        if step.name == AS_DECIDED:
            return in_workspace(run, [_batch(run.id, step.position)])
        text = describe_step(step)
        if text is None:
            return ()
        status = [_root_update(run.id, f"step:{step.position}")] if _waits(step) else []
        return in_workspace(run, [_reply(run.id, f"step:{step.position}", text), *status])

    def run_ended(self, run: Run) -> Sequence[Notice]:
        """The final answer or the error, in the thread; refresh the requester's Home tab."""
        where = slack_context(run)
        if where is None:
            return ()
        if run.status == RunStatus.COMPLETED:
            answer = (run.output or {}).get("answer") if isinstance(run.output, dict) else None
            ended = (run.output or {}).get("ended") if isinstance(run.output, dict) else None
            text = (
                f"🛑 {ended_line(run.output)}."
                if ended and isinstance(run.output, dict)
                else f"✅ *Done:* {shown(str(answer or run.output), 2500)}"
            )
        else:
            error = run.error
            icon = "🛑" if run.status == RunStatus.CANCELLED else "❌"
            text = f"{icon} *{run.status.value.capitalize()}*" + (
                f": {shown(error.message, 2500)}" if error else ""
            )
        told = [_reply(run.id, "end", text), _root_update(run.id, "end")]
        return [*in_place(where, told), *run_refreshes(run, where)]

    def approval_changed(self, approval: Approval, action: str) -> Sequence[Notice]:
        """Post the card (and DMs) when asked; update them and tell the thread after."""
        try:
            where = self._place(approval.run_id)
        except RunNotFound:
            return ()
        if where is None:
            return ()
        run_id = approval.run_id
        status = _root_update(run_id, f"approval:{approval.id}:{action}:v{approval.version}")
        here = approval.requester
        automatic = decided_automatically(approval)
        tabs = approval_refreshes(approval, action, where, automatic=automatic)
        if action == "requested":
            deciders = () if automatic else local_people(approval.eligible, here)
            cards = [_card(approval, None), *(_card(approval, u) for u in deciders)]
            return [*in_place(where, [*cards, status]), *tabs]
        approvers = approval.policy.approvers
        dms = [] if automatic else list(local_people(approvers, here))
        escalated = local_people(approval.policy.escalate_to, here)
        if approval.escalated and action != "escalated":
            dms += escalated
        notices = [_update(approval, None), *(_update(approval, u) for u in dms)]
        if action == "escalated":
            notices += [_card(approval, u) for u in escalated]
        if action == "reminded":
            notices.append(
                _reply(
                    run_id,
                    f"remind:{approval.id}:{approval.version}",
                    (f"⏰ Still waiting for a decision on *{tool_name(approval.tool)}*."),
                )
            )
        if approval.status != ApprovalStatus.PENDING:
            line = (
                f"💸 *Budget*: {decided_line(approval)}"
                if approval.kind == ApprovalKind.BUDGET
                else f"*{tool_name(approval.tool)}*: {decision_line(approval)}"
            )
            notices.append(_reply(run_id, f"decided:{approval.id}", line))
        return [*in_place(where, [*notices, status]), *tabs]

    def grant_changed(self, grant: Grant, action: str) -> Sequence[Notice]:
        """Post the grant's message in the thread it came from; update it once revoked; and
        refresh the grantor's Home tab."""
        try:
            where = self._place(grant.run_id)
        except RunNotFound:
            return ()
        if where is None:
            return ()
        data = {"grant_id": grant.id, "target": grant_key(grant.id)}
        if action == "created":
            told = Notice(key=grant_key(grant.id), run_id=grant.run_id, kind=GRANT, data=data)
        else:
            key = f"{grant_key(grant.id)}:{action}"
            told = Notice(key=key, run_id=grant.run_id, kind=GRANT_UPDATE, data=data)
        return [*in_place(where, [told]), *grant_refreshes(grant, where)]


def grant_key(grant_id: str) -> str:
    """The key of a grant's message in its run's thread."""
    return f"grant:{grant_id}:message"


def decided_automatically(approval: Approval) -> bool:
    """Tell whether a rule or a grant decided the approval as it was asked (nobody is sent a
    direct message about it)."""
    by = approval.decided_by
    return by is not None and by.user_id.startswith(AUTOMATIC_ACTOR_PREFIXES)


def describe_step(step: StepRecord) -> str | None:
    """One line for a journal entry, or None for entries not worth a message."""
    if step.name == MODEL:
        calls = (step.output or {}).get("message", {}).get("tool_calls") or []
        if not calls:
            return None
        plans = ", ".join(
            f"`{tool_name(c['name'])}`({shown(_args(c['arguments']), 120)})"
            for c in calls[:PLANS_SHOWN]
        )
        more = len(calls) - PLANS_SHOWN
        return f"🤖 Plans: {plans}" + (f" and {more} more calls" if more > 0 else "")
    called = tool_of(TOOL, step.name)
    if called is not None:
        tool = tool_name(called)
        if step.error is not None:
            return f"⚠️ `{tool}` failed: {shown(step.error.message, REPLY_LIMIT)}"
        return f"🔧 `{tool}` → {shown(_args(step.output), REPLY_LIMIT)}"
    refused = tool_of(TOOL_STARTED, step.name)
    if refused is not None and (step.output or {}).get("refused"):
        why = shown(str(step.output["refused"]), REPLY_LIMIT)
        return f"🚫 `{tool_name(refused)}` was not run: {why}"
    if step.name == BUDGET_EXHAUSTED:
        limit = shown(str((step.output or {}).get("limit")), 80)
        return f"💸 Budget exhausted ({limit}). An approver can raise it or end the run."
    interrupted = tool_of(TOOL_UNKNOWN_OUTCOME, step.name)
    if interrupted is not None:
        tool = tool_name(interrupted)
        strategy = shown(str((step.output or {}).get("strategy")), 40)
        return f"⚠️ A crash interrupted `{tool}`; its outcome is unknown ({strategy})."
    return None


def _args(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _reply(run_id: str, suffix: str, text: str) -> Notice:
    return Notice(
        key=f"run:{run_id}:{suffix}", run_id=run_id, kind=REPLY, data={"text": message(text)}
    )


def _waits(step: StepRecord) -> bool:
    """Whether the step puts the run in a wait its root message should show."""
    return step.name == BUDGET_EXHAUSTED


def _batch(run_id: str, before: int) -> Notice:
    """Gather the turn's approvals (those just before step ``before``) if two or more wait."""
    return Notice(
        key=f"run:{run_id}:batch:{before}", run_id=run_id, kind=BATCH, data={"before": before}
    )


def _root_update(run_id: str, suffix: str) -> Notice:
    """Update the root message to the run's status when sent (a later state, if any, wins)."""
    return Notice(key=f"{root_key(run_id)}:{suffix}", run_id=run_id, kind=ROOT_UPDATE)


def _card(approval: Approval, user: str | None) -> Notice:
    # DMs are not ordered with the run's thread: one that cannot be delivered must not
    # hold the thread up
    return Notice(
        key=card_key(approval.id, user),
        run_id=None if user else approval.run_id,
        kind=DM if user else CARD,
        data={"approval_id": approval.id, "user": user},
    )


def _update(approval: Approval, user: str | None) -> Notice:
    return Notice(
        key=f"{card_key(approval.id, user)}:v{approval.version}",
        run_id=None if user else approval.run_id,
        kind=CARD_UPDATE,
        data={"approval_id": approval.id, "target": card_key(approval.id, user)},
    )
