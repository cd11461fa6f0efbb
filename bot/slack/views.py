"""Text answers to ``/agent status|history|list|pending``: read from the database only."""

from __future__ import annotations

from agent_runtime import Actor, Approvals, ApprovalStatus, RunId, Runtime
from agent_runtime.records import Run
from bot.slack.notifier import describe_step, slack_context
from bot.slack.text import escape, truncate, user

RECENT = 200
SHOWN = 15


def status_text(runtime: Runtime, run_id: RunId | None, actor: Actor) -> str:
    """A run's status, or the status of ``actor``'s latest run."""
    run = runtime.get(run_id) if run_id else _latest(runtime, actor)
    if run is None:
        return "You have no runs yet. Start one with `/agent <task>`."
    steps = len(runtime.journal(run.id))
    waiting = f" (waiting for `{escape(run.wait_key)}`)" if run.wait_key else ""
    return (f"Run `{run.id}`: *{run.status.value}*{waiting} · {steps} journal entries · "
            f"task: {escape(truncate(_task(run), 200))}")


def history_text(runtime: Runtime, run_id: RunId) -> str:
    """A compact timeline of a run, from its journal."""
    run = runtime.get(run_id)
    task = escape(truncate(_task(run), 200))
    lines = [f"*History of run* `{run.id}` ({run.status.value}): {task}"]
    for step in runtime.journal(run_id):
        text = describe_step(step)
        if text is not None:
            lines.append(f"{step.finished_at:%H:%M:%S} {text}")
    if run.error is not None:
        lines.append(f"❌ {escape(truncate(run.error.message, 500))}")
    return truncate("\n".join(lines), 2900)


def list_text(runtime: Runtime, channel: str) -> str:
    """The recent runs started in ``channel``."""
    runs = [r for r in runtime.runs(limit=RECENT)
            if (slack_context(r) or {}).get("channel") == channel][:SHOWN]
    if not runs:
        return "No runs in this channel yet."
    return "\n".join(f"`{r.id}` {r.status.value} · {escape(truncate(_task(r), 80))}"
                     for r in runs)


def pending_text(approvals: Approvals, actor: Actor) -> str:
    """Approvals that ``actor`` may decide now."""
    mine = [a for a in approvals.store.list_approvals(status=ApprovalStatus.PENDING)
            if actor.user_id in a.eligible]
    if not mine:
        return "Nothing is waiting on you."
    return "\n".join(f"`{a.id}` *{escape(a.tool)}* for run `{a.run_id}`, asked by "
                     f"{user(a.requester.user_id)}" for a in mine[:SHOWN])


def _latest(runtime: Runtime, actor: Actor) -> Run | None:
    for run in runtime.runs(limit=RECENT):
        requester = run.input.get("requester", {}) if isinstance(run.input, dict) else {}
        if requester.get("user_id") == actor.user_id:
            return run
    return None


def _task(run: Run) -> str:
    return str(run.input.get("task", "")) if isinstance(run.input, dict) else run.workflow
