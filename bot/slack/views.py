"""Text answers to ``/agent status|history|list|pending``: read from the database only."""

from __future__ import annotations

from agent_runtime import Actor, AgentInput, Approvals, RunId, Runtime
from agent_runtime.records import Run, StepRecord
from agent_runtime.step_names import MODEL
from bot.slack.blocks import Block, history_blocks
from bot.slack.notifier import describe_step
from bot.slack.text import escape, shown, tool_name, truncate, user
from bot.slack.waiting import waiting_on

SHOWN = 15


def status_text(runtime: Runtime, run_id: RunId | None, actor: Actor) -> str:
    """A run's status, or the status of ``actor``'s latest run."""
    run = runtime.get(run_id) if run_id else _latest(runtime, actor)
    if run is None:
        return "You have no runs yet. Start one with `/agent &lt;task&gt;`."
    steps = len(runtime.journal(run.id))
    waiting = f" (waiting for `{escape(run.wait_key)}`)" if run.wait_key else ""
    return (
        f"Run `{run.id}`: *{run.status.value}*{waiting} · {steps} journal entries · "
        f"task: {shown(task_of(run), 200)}"
    )


def history_message(runtime: Runtime, run_id: RunId) -> tuple[str, list[Block]]:
    """A run's compact timeline as text, and as blocks with "Fork from here" on model calls."""
    run = runtime.get(run_id)
    task = shown(task_of(run), 200)
    header = f"*History of run* `{run.id}` ({run.status.value}): {task}"
    if run.forked_from is not None:
        header += f"\nForked from `{run.forked_from}` at step {run.fork_at}."
    lines: list[tuple[str, int | None]] = []
    for step in runtime.journal(run_id):
        text = _history_line(step)
        if text is not None:
            model = step.name == MODEL and step.error is None
            lines.append((f"{step.finished_at:%H:%M:%S} {text}", step.position if model else None))
    if run.error is not None:
        lines.append((f"❌ {shown(run.error.message, 500)}", None))
    text = truncate("\n".join([header, *(line for line, _ in lines)]), 2900)
    return text, history_blocks(run.id, header, lines)


def _history_line(step: StepRecord) -> str | None:
    text = describe_step(step)
    if text is None and step.name == MODEL and isinstance(step.output, dict):
        answer = str((step.output.get("message") or {}).get("content") or "")
        return f"🤖 Answers: {shown(answer, 200)}"
    return text


def list_text(runtime: Runtime, channel: str, actor: Actor) -> str:
    """The recent runs started in ``channel`` (of ``actor``'s workspace)."""
    where = {"context.slack.channel": channel}
    if actor.team_id:
        where["context.slack.team"] = actor.team_id
    runs = runtime.runs(input_fields=where, limit=SHOWN)
    if not runs:
        return "No runs in this channel yet."
    return "\n".join(f"`{r.id}` {r.status.value} · {shown(task_of(r), 80)}" for r in runs)


def pending_text(approvals: Approvals, actor: Actor) -> str:
    """Approvals that ``actor`` may decide now."""
    mine = waiting_on(approvals.store, actor, limit=SHOWN)
    if not mine:
        return "Nothing is waiting on you."
    return "\n".join(
        f"`{a.id}` *{tool_name(a.tool)}* for run `{a.run_id}`, asked by {user(a.requester.user_id)}"
        for a in mine
    )


def requester_fields(actor: Actor) -> dict[str, str]:
    """The input fields of the runs ``actor`` started (in their workspace)."""
    where = {"requester.user_id": actor.user_id}
    if actor.team_id:
        where["requester.team_id"] = actor.team_id
    return where


def _latest(runtime: Runtime, actor: Actor) -> Run | None:
    found = runtime.runs(input_fields=requester_fields(actor), limit=1)
    return found[0] if found else None


def task_of(run: Run) -> str:
    """The task a run was asked (its workflow's name if it has none)."""
    data = AgentInput.of(run.input)
    return run.workflow if data is None else data.task
