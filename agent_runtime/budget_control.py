"""What a person can do about a run whose budget ran out: raise it, or end the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_runtime.agent import Agent, AgentInput
from agent_runtime.approval_service import Approvals
from agent_runtime.approvals import Actor, Approval, ApprovalKind, ApprovalStatus, Decision
from agent_runtime.budget import Budget, Consumption
from agent_runtime.budget_ask import raised_arguments
from agent_runtime.exceptions import (
    ApprovalNotFound,
    ApprovalNotPending,
    InvalidRunState,
    UserError,
)
from agent_runtime.ids import RunId
from agent_runtime.models.base import Usage
from agent_runtime.records import Run, RunStatus, StepKind, StepRecord
from agent_runtime.runtime import Runtime
from agent_runtime.step_names import MODEL, TOOL, approval_waited, is_budget_key, tool_of


class NotAllowed(UserError):
    """The person may not do this."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetOutcome:
    """What a raise or an end did: taken or not, a message for the person, the run now."""

    accepted: bool
    message: str
    run: Run


def decide_budget(
    runtime: Runtime,
    agent: Agent,
    run_id: RunId,
    actor: Actor,
    *,
    limits: Budget | None = None,
    end: bool = False,
    seen_hash: str | None = None,
    approval_id: str | None = None,
) -> BudgetOutcome:
    """Raise the exhausted budget of a waiting run to ``limits``, or end the run.

    The one way to do either, from Slack or the command line. A raise decides the run's
    budget approval with its ``raise_to`` edited to ``limits``: who may, how many must
    agree, the compare-and-set and the audit entry are those of any approval (``seen_hash``
    is the hash of the arguments the person was shown, ``approval_id`` the approval they
    were shown: another one, asked since, is not decided in its place). Ending cancels the
    run with its approvals closed in one transaction, if ``actor`` could have decided the
    approval and only while it is still pending in that transaction (a raise landing first
    wins, and the person is told who decided).
    Runs that asked before raises were approvals get the decision delivered as then.
    """
    run = runtime.get(run_id)
    if is_budget_key(run.wait_key):
        return _deliver(runtime, agent, run, actor, limits, end)
    asked = waiting_raise(runtime, run)
    late = None if asked is not None else _decided_meanwhile(runtime, run, actor, approval_id, end)
    if late is not None:
        return late
    if asked is None or runtime.approvals is None or approval_id not in (None, asked.id):
        raise InvalidRunState(
            run_id, run.status.value + " (its budget is not exhausted)", "raise the budget of"
        )
    approvals = runtime.approvals
    if end:
        return _end(runtime, approvals, run, asked, actor)
    chosen = {k: v for k, v in (limits or Budget()).to_json().items() if v is not None}
    result = approvals.decide(
        asked.id,
        actor,
        Decision.EDIT,
        edited_args=raised_arguments(asked.args, chosen),
        seen_hash=seen_hash,
    )
    return BudgetOutcome(accepted=result.accepted, message=result.message, run=runtime.get(run.id))


def _end(
    runtime: Runtime, approvals: Approvals, run: Run, asked: Approval, actor: Actor
) -> BudgetOutcome:
    """Cancel the run if ``actor`` may decide ``asked`` and only while it is still pending
    (in the cancel's transaction); otherwise say who decided what."""
    refused = approvals.refuse(asked.id, actor, Decision.REJECT)
    if refused is not None:
        return BudgetOutcome(accepted=False, message=refused.message, run=run)
    try:
        ended = runtime.cancel(run.id, by=actor, while_pending=asked.id)
    except ApprovalNotPending:
        # decided since it was read: the refusal now says who decided what, and is audited
        late = approvals.refuse(asked.id, actor, Decision.REJECT)
        message = late.message if late is not None else "the budget approval was decided"
        return BudgetOutcome(accepted=False, message=message, run=runtime.get(run.id))
    return BudgetOutcome(accepted=True, message=f"ended by {actor.label}", run=ended)


def _decided_meanwhile(
    runtime: Runtime, run: Run, actor: Actor, approval_id: str | None, end: bool
) -> BudgetOutcome | None:
    """If the budget approval ``actor`` was shown has been decided (raised, ended, expired),
    say who decided what, the attempt audited as late like any decision's; else None."""
    if approval_id is None or runtime.approvals is None:
        return None
    try:
        shown = runtime.approvals.get(approval_id)
    except ApprovalNotFound:
        return None
    if shown.run_id != run.id or shown.kind != ApprovalKind.BUDGET:
        return None
    if shown.status == ApprovalStatus.PENDING:
        return None
    refused = runtime.approvals.refuse(shown.id, actor, Decision.REJECT if end else Decision.EDIT)
    if refused is None:
        return None
    return BudgetOutcome(accepted=False, message=refused.message, run=run)


def waiting_raise(runtime: Runtime, run: Run) -> Approval | None:
    """Return the pending budget approval ``run`` waits for, if it waits for one."""
    approval = approval_waited(run.wait_key)
    if run.status != RunStatus.WAITING or runtime.approvals is None or approval is None:
        return None
    try:
        found = runtime.approvals.get(approval)
    except ApprovalNotFound:
        return None
    pending = found.status == ApprovalStatus.PENDING
    return found if pending and found.kind == ApprovalKind.BUDGET else None


def _deliver(
    runtime: Runtime, agent: Agent, run: Run, actor: Actor, limits: Budget | None, end: bool
) -> BudgetOutcome:
    """Deliver the decision to a run waiting under a ``budget:`` key (asked before raises
    were approvals): anyone ``may_raise_budget`` in the run's workspace decides."""
    started = AgentInput.of(run.input)
    started_by = None if started is None else started.requester
    in_workspace = started_by is None or actor.shares_workspace(started_by)
    if not (in_workspace and agent.may_raise_budget(actor)):
        raise NotAllowed(f"{actor.label} may not change the budget of agent {agent.name!r}")
    data: dict[str, Any] = {"action": "end" if end else "raise", "by": actor.to_json()}
    if limits is not None:
        data["limits"] = {k: v for k, v in limits.to_json().items() if v is not None}
    delivered = runtime.deliver(run.id, run.wait_key or "", data)
    return BudgetOutcome(accepted=True, message="ended" if end else "raised", run=delivered)


def model_call_of(step: StepRecord) -> tuple[Usage, str]:
    """The usage and model name a journaled model step recorded."""
    output = step.output if isinstance(step.output, dict) else {}
    usage = output.get("usage") or {}
    return (
        Usage(
            input_tokens=usage.get("input_tokens", 0), output_tokens=usage.get("output_tokens", 0)
        ),
        output.get("model") or "",
    )


def usage_of(journal: list[StepRecord], agent: Agent) -> Consumption:
    """Rebuild a run's consumption from its journal."""
    used = Consumption()
    for step in journal:
        if step.kind != StepKind.STEP or step.error is not None:
            continue
        if step.name == MODEL:
            usage, model = model_call_of(step)
            used.add_model_call(usage, agent.prices.get(model or agent.llm.name))
        elif tool_of(TOOL, step.name) is not None:
            used.tool_calls += 1
    return used
