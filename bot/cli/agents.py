"""Commands for agents: run one, list approvals, decide them, raise budgets."""

from __future__ import annotations

import argparse
from typing import Any

from agent_runtime.approvals import Approval, ApprovalKind, Decision
from bot.app.settings import Settings
from bot.cli.common import (
    UsageError,
    actor,
    as_flag,
    cli_user,
    emit,
    json_argument,
    json_flag,
    positive_float,
    positive_int,
    run_id,
    workspace_actor,
)
from bot.cli.render import approval_json, approval_line, run_json


def add_commands(commands: Any) -> None:
    """Add the agent commands to the ``signoff`` parser."""
    run = commands.add_parser("run", help="start an agent run on a task; prints its id")
    run.add_argument("task")
    run.add_argument("--agent", help="the agent's name (default: the configured one)")
    run.add_argument("--budget-usd", type=positive_float)
    run.add_argument("--budget-tokens", type=positive_int)
    as_flag(run, required=False)
    json_flag(run).set_defaults(handler=cmd_run)

    listing = commands.add_parser("approvals", help="list approvals, newest first")
    listing.add_argument("--pending", action="store_true", help="only those still waiting")
    listing.add_argument("--run", type=run_id, help="only those of this run")
    listing.add_argument("--limit", type=positive_int, default=100)
    listing.add_argument("--after", help="the next page: approvals older than this one")
    json_flag(listing).set_defaults(handler=cmd_approvals)

    for name, help_text in (
        ("approve", "approve a tool call (or answer yes: a call a crash cut off happened)"),
        ("reject", "reject a tool call, with a reason (or answer no: the cut-off call runs again)"),
        ("edit", "approve a tool call with edited arguments"),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("approval")
        as_flag(sub)
        sub.add_argument("--reason", required=name == "reject")
        if name == "edit":
            sub.add_argument("--args", required=True, help="the edited arguments as JSON")
        if name != "reject":
            sub.add_argument(
                "--args-hash",
                metavar="SHA256",
                help="the hash (or its first 8+ digits) of the arguments you "
                "reviewed; refused if they have changed since",
            )
        json_flag(sub).set_defaults(handler=cmd_decide, decision=Decision(name))

    budget = commands.add_parser("raise-budget", help="raise (or --end) an exhausted budget")
    budget.add_argument("run", type=run_id)
    budget.add_argument("--usd", type=positive_float)
    budget.add_argument("--tokens", type=positive_int)
    budget.add_argument("--model-calls", type=positive_int)
    budget.add_argument("--tool-calls", type=positive_int)
    budget.add_argument("--end", action="store_true", help="end the run instead")
    as_flag(budget)
    json_flag(budget).set_defaults(handler=cmd_raise_budget)


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    """Start an agent run."""
    from agent_runtime.agent import AgentInput
    from agent_runtime.budget import Budget
    from bot.app.wiring import build_services

    services = build_services(settings)
    agent = services.agents.get(args.agent)
    budget = None
    if args.budget_usd is not None or args.budget_tokens is not None:
        budget = Budget(
            cost_usd=args.budget_usd or agent.budget.cost_usd,
            tokens=args.budget_tokens or agent.budget.tokens,
            model_calls=agent.budget.model_calls,
            tool_calls=agent.budget.tool_calls,
            wall_time=agent.budget.wall_time,
        )
    requester = actor(args) if args.actor else cli_user()
    data = AgentInput(task=args.task, requester=requester, budget=budget).to_json()
    run = services.runtime.start(agent.workflow, data)
    emit(args, run_json(run), run.id)
    return 0


def cmd_approvals(args: argparse.Namespace, settings: Settings) -> int:
    """List approvals."""
    from agent_runtime.approvals import ApprovalStatus
    from bot.app.wiring import build_services

    status = ApprovalStatus.PENDING if args.pending else None
    found = build_services(settings).approvals.store.list_approvals(
        run_id=args.run, status=status, limit=args.limit, after=args.after
    )
    emit(
        args,
        [approval_json(a) for a in found],
        "\n".join(approval_line(a) for a in found) or "no approvals",
    )
    return 0


def cmd_decide(args: argparse.Namespace, settings: Settings) -> int:
    """Approve, reject or edit an approval; exit 1 if the decision was refused."""
    from bot.app.wiring import build_services

    edited = json_argument("--args", args.args) if args.decision == Decision.EDIT else None
    if args.decision == Decision.REJECT and not (args.reason or "").strip():
        raise UsageError("--reason must say why (the agent is told it)")
    approvals = build_services(settings).approvals
    seen = getattr(args, "args_hash", None)
    if seen is not None:
        if len(seen) < 8:
            raise UsageError("--args-hash needs at least 8 hex digits")
        current = approvals.get(args.approval).proposed_hash
        seen = current if current.startswith(seen.lower()) else seen
    result = approvals.decide(
        args.approval,
        workspace_actor(args, settings.is_oauth),
        args.decision,
        reason=args.reason,
        edited_args=edited,
        seen_hash=seen,
    )
    emit(
        args,
        {
            "accepted": result.accepted,
            "message": result.message,
            "approval": approval_json(result.approval),
        },
        result.message + _meaning(result.approval, args.decision, result.accepted),
    )
    return 0 if result.accepted else 1


def _meaning(approval: Approval, decision: Decision, accepted: bool) -> str:
    """What a decision taken on a question about a call a crash cut off does ('' for any
    other approval): rejecting it runs the call again."""
    if not accepted or approval.kind != ApprovalKind.OUTCOME:
        return ""
    if decision == Decision.REJECT:
        return f"\nrecorded that {approval.tool} did not happen: it runs again"
    return f"\nrecorded that {approval.tool} happened: it is not run again"


def cmd_raise_budget(args: argparse.Namespace, settings: Settings) -> int:
    """Raise an exhausted budget or end the run; exit 1 if the decision was refused."""
    from agent_runtime.budget import Budget
    from agent_runtime.budget_control import decide_budget
    from bot.app.wiring import build_services

    services = build_services(settings)
    run = services.runtime.get(args.run)
    agent = services.agents.for_workflow(run.workflow)
    if agent is None:
        raise UsageError(f"run {run.id} is not an agent run")
    limits = Budget(
        cost_usd=args.usd,
        tokens=args.tokens,
        model_calls=args.model_calls,
        tool_calls=args.tool_calls,
    )
    who = workspace_actor(args, settings.is_oauth)
    outcome = decide_budget(services.runtime, agent, run.id, who, limits=limits, end=args.end)
    if not outcome.accepted:
        emit(args, {"accepted": False, "message": outcome.message}, outcome.message)
        return 1
    verb = "ended" if args.end else "raised the budget of"
    emit(args, run_json(outcome.run), f"{verb} {run.id}: {outcome.message}")
    return 0
