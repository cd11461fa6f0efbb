"""``signoff inspect``, ``fork`` and ``eval``: the journal as debugger, time machine, eval set."""

from __future__ import annotations

import argparse
import json
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_runtime.exceptions import InvalidInput
from bot.app.settings import Settings
from bot.cli.common import UsageError, emit, json_argument, json_flag, positive_int, run_id
from bot.cli.render import run_json, run_line

if TYPE_CHECKING:
    from agent_runtime import Agent, Run
    from agent_runtime.evals import EvalReport
    from agent_runtime.model_input import ModelInput
    from bot.app.wiring import Services


def add_commands(commands: Any) -> None:
    """Add ``inspect`` and ``fork``."""
    inspect = commands.add_parser(
        "inspect", help="exactly what the model saw at a step, rebuilt from the journal"
    )
    inspect.add_argument("run", type=run_id)
    inspect.add_argument(
        "--step",
        type=int,
        required=True,
        metavar="K",
        help="the journal position of a model call (see `signoff history`)",
    )
    json_flag(inspect).set_defaults(handler=cmd_inspect)

    fork = commands.add_parser(
        "fork", help="a new run from a run's first K steps, continuing live from step K"
    )
    fork.add_argument("run", type=run_id)
    fork.add_argument(
        "--at",
        type=int,
        required=True,
        metavar="K",
        help="the step to continue from (a model call, for an agent run)",
    )
    fork.add_argument(
        "--output", metavar="JSON", help="use this as step K's result instead of taking it live"
    )
    choice = fork.add_mutually_exclusive_group()
    choice.add_argument("--agent", metavar="NAME", help="continue under another agent")
    choice.add_argument(
        "--model",
        metavar="SPEC",
        help="continue with another model (openai:M, anthropic:M, module:attr)",
    )
    json_flag(fork).set_defaults(handler=cmd_fork)

    evaluate = commands.add_parser(
        "eval", help="re-run recorded runs with another agent or model; tools are never run"
    )
    evaluate.add_argument("runs", type=run_id, nargs="+", metavar="RUN")
    candidate = evaluate.add_mutually_exclusive_group(required=True)
    candidate.add_argument("--agent", metavar="NAME", help="the agent to evaluate")
    candidate.add_argument(
        "--model", metavar="SPEC", help="the model to evaluate (openai:M, anthropic:M, module:attr)"
    )
    evaluate.add_argument(
        "--stop-at-divergence",
        action="store_true",
        help="end a re-run at its first tool call that was not recorded",
    )
    evaluate.add_argument(
        "--concurrency",
        type=positive_int,
        default=1,
        metavar="N",
        help="re-run up to N runs at once (default 1)",
    )
    evaluate.add_argument("--report", metavar="FILE.html", help="also write an HTML report")
    json_flag(evaluate).set_defaults(handler=cmd_eval)


def cmd_inspect(args: argparse.Namespace, settings: Settings) -> int:
    """Print the model input of step K."""
    from agent_runtime.agent import AgentInput
    from agent_runtime.agent_loop import with_model
    from agent_runtime.model_input import model_input
    from bot.app.wiring import build_services

    services = build_services(settings)
    run = services.runtime.get(args.run)
    agent = _agent_of(services, run)
    data = AgentInput.of(run.input)
    seen = model_input(
        with_model(agent, None if data is None else data.model, services.models),
        services.approvals,
        run,
        services.runtime.journal(run.id),
        args.step,
    )
    emit(args, seen.to_json(), _inspect_text(seen))
    return 0 if seen.identical else 1


def cmd_fork(args: argparse.Namespace, settings: Settings) -> int:
    """Create the fork and print it; any worker continues it."""
    from agent_runtime.agent_loop import with_model
    from agent_runtime.forking import agent_can_continue, fork_run
    from bot.app.wiring import build_services

    services = build_services(settings)
    runtime = services.runtime
    source = runtime.get(args.run)
    agent = services.agents.for_workflow(source.workflow)
    if agent is None and (args.agent or args.model):
        raise UsageError(f"run {source.id} is not an agent run: --agent and --model need one")
    workflow, data = _target(services, source, args)
    output = None if args.output is None else json_argument("--output", args.output)
    target = services.agents.for_workflow(workflow)
    check = (
        None
        if target is None
        else agent_can_continue(
            with_model(target, data.get("model"), services.models), services.approvals
        )
    )
    forked = fork_run(
        runtime,
        source.id,
        args.at,
        agent_run=agent is not None,
        output=output,
        replace_output=args.output is not None,
        workflow=workflow,
        input=data,
        check=check,
    )
    emit(args, run_json(forked), f"{run_line(forked)}  fork of {source.id} at step {args.at}")
    return 0


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    """Compare each recorded run with its re-run by the candidate."""
    from concurrent.futures import ThreadPoolExecutor

    from agent_runtime.evals import EvalReport, compare
    from bot.app.wiring import build_services
    from bot.cli.eval_report import render_html

    services = build_services(settings)
    runtime = services.runtime
    jobs = []
    for run in (runtime.get(r) for r in dict.fromkeys(args.runs)):
        agent = _agent_of(services, run)
        decided = services.approvals.store.list_approvals(run_id=run.id, limit=10_000)
        jobs.append(
            partial(
                compare,
                agent,
                _candidate(services, agent, args),
                services.approvals,
                run,
                runtime.journal(run.id),
                decided=decided,
                stop_at_divergence=args.stop_at_divergence,
            )
        )
    # re-runs touch no database (the recorded run is replayed, the re-run kept in memory),
    # so they may overlap: a live model's latency is what an eval mostly waits for
    with ThreadPoolExecutor(args.concurrency, thread_name_prefix="signoff-eval") as pool:
        comparisons = list(pool.map(lambda job: job(), jobs))
    report = EvalReport(args.agent or args.model, comparisons)
    if args.report:
        _write(args.report, render_html(report))
    emit(args, report.to_json(), _eval_text(report))
    return 0


def _candidate(services: Services, agent: Agent, args: argparse.Namespace) -> Agent:
    from agent_runtime.agent_loop import with_model

    if args.agent:
        return services.agents.get(args.agent)
    try:
        return with_model(agent, args.model, services.models)
    except ValueError as exc:
        raise UsageError(f"--model: {exc}") from None


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--report: cannot write {path}: {exc.strerror}") from None


def _eval_text(report: EvalReport) -> str:
    lines = []
    for comparison in report.comparisons:
        data = comparison.to_json()
        verdict = "agrees  " if comparison.agrees else "DIVERGES"
        lines.append(
            f"{comparison.run_id}  {verdict}  calls {len(comparison.candidate.calls)}"
            f"/{len(comparison.recorded.calls)}  answer "
            f"{'same' if comparison.same_answer else 'differs'}  tokens "
            f"{data['token_delta']:+d}  cost {data['cost_delta_usd']:+.6f}"
        )
        lines += [
            f"    call {d.index + 1}: {d.call.tool} {json.dumps(d.call.arguments)} was not recorded"
            for d in comparison.divergences
        ]
    summary = report.summary()
    counts = summary["approvals"]
    lines.append(
        f"agreement {summary['agreement_rate'] * 100:.1f} % "
        f"({summary['agreeing']}/{summary['runs']} runs); tokens "
        f"{summary['token_delta']:+d}; cost {summary['cost_delta_usd']:+.6f} USD"
    )
    lines.append(
        f"approvals asked {counts['triggered']}; its calls rejected in the recording "
        f"{counts['rejected_in_recording']}; argument fields from what approvers signed "
        f"{counts['fields_from_signed']} over {counts['signed_compared']} calls (recorded "
        f"model: {counts['recorded_fields_from_signed']})"
    )
    return "\n".join(lines)


def _target(services: Services, source: Run, args: argparse.Namespace) -> tuple[str, Any]:
    """Return the fork's workflow and input: the source's, or another agent's or model's."""
    data = source.input
    if not isinstance(data, dict) or not (args.agent or args.model):
        return source.workflow, data
    if args.agent:
        return services.agents.get(args.agent).workflow, _without_model(data)
    _candidate(services, _agent_of(services, source), args)
    return source.workflow, data | {"model": args.model}


def _agent_of(services: Services, run: Run) -> Agent:
    agent = services.agents.for_workflow(run.workflow)
    if agent is None:
        raise InvalidInput("inspect", f"run {run.id} is a {run.workflow} run, not an agent run")
    return agent


def _without_model(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "model"}


def _inspect_text(seen: ModelInput) -> str:
    request = seen.request
    verdict = (
        "identical to the request sent (input hash " + seen.input_hash + ")"
        if seen.identical
        else f"DIFFERENT from the request sent: rebuilt {seen.input_hash}, recorded "
        f"{seen.recorded_input_hash} (the agent changed since the run)"
    )
    data = seen.to_json()
    lines = [
        f"run {seen.run_id} step {seen.position}: {verdict}",
        f"system prompt (sha256 {data['system_prompt_sha256'][:16]}):",
        *(f"  {line}" for line in request["system"].splitlines()),
        "tools: " + ", ".join(t["name"] for t in request["tools"]),
        f"max output tokens: {request['max_output_tokens']}",
        "used so far: " + ", ".join(f"{k} {v}" for k, v in seen.used.items()),
        "budget left: "
        + (", ".join(f"{k} {v}" for k, v in seen.budget_left.items()) or "unlimited"),
        f"conversation ({len(request['messages'])} messages):",
    ]
    for message in request["messages"]:
        lines.append(f"  [{message['role']}] {message['content']}")
        lines += [
            f"    -> {c['name']} {json.dumps(c['arguments'], sort_keys=True)}"
            for c in message.get("tool_calls", [])
        ]
    return "\n".join(lines)
