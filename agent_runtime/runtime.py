"""The runtime's front: start, inspect, cancel, signal and resume runs from any process."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from agent_runtime.approval_service import Approvals
from agent_runtime.approvals import Actor
from agent_runtime.clock import Clock, SystemClock
from agent_runtime.exceptions import InvalidInput
from agent_runtime.ids import RunId, new_run_id
from agent_runtime.notices import Notifier, Silent
from agent_runtime.observers import StepObserver, guard
from agent_runtime.records import AttemptRecord, Fork, Run, RunStatus, StepRecord
from agent_runtime.serialization import round_trip
from agent_runtime.step_names import RESERVED_KEYS
from agent_runtime.store import Store
from agent_runtime.worker import Worker, WorkerOptions
from agent_runtime.workflows import Workflows


class Runtime:
    """Operations on runs that any process may perform; workers do the executing."""

    def __init__(
        self,
        store: Store,
        workflows: Workflows,
        *,
        clock: Clock | None = None,
        sweeps: Sequence[Callable[[], object]] = (),
        notifier: Notifier | None = None,
        observer: StepObserver | None = None,
        approvals: Approvals | None = None,
    ) -> None:
        """``observer`` hears of what this process commits: entries and ends of the runs its
        workers execute, and the end of a run it cancels while no worker holds it. With
        ``approvals``, a cancel rejects the run's pending approvals in its transaction."""
        self.store = store
        self.approvals = approvals
        self.workflows = workflows
        self.clock = clock or SystemClock()
        self.sweeps = tuple(sweeps)
        self.notifier: Notifier = notifier or Silent()
        self.observer = guard(observer)

    def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        fork: Fork | None = None,
        run_id: RunId | None = None,
    ) -> Run:
        """Create a pending run of ``workflow``; ``WorkflowNotFound`` if it is not registered.

        With ``fork`` the run starts from another run's journal (see ``forking``); with
        ``run_id`` it takes an id chosen beforehand (one already promised to someone).
        """
        value = round_trip(input, what="the run's input")
        self.workflows.validate_input(workflow, value)
        now = self.clock.now()
        draft = Run(
            id=run_id or new_run_id(),
            workflow=workflow,
            status=RunStatus.PENDING,
            input=value,
            created_at=now,
            updated_at=now,
            due_at=now,
            forked_from=None if fork is None else fork.source,
            fork_at=None if fork is None else fork.at,
        )
        return self.store.create_run(
            draft.id, workflow, value, now, self.notifier.run_started(draft), fork
        )

    def forks(self, run_id: RunId) -> list[Run]:
        """Return the runs forked from ``run_id``, newest first."""
        return self.store.list_runs(forked_from=run_id, limit=1000)

    def get(self, run_id: RunId) -> Run:
        """Return the run or raise ``RunNotFound``."""
        return self.store.get_run(run_id)

    def runs(
        self,
        *,
        status: RunStatus | None = None,
        limit: int = 100,
        input_fields: Mapping[str, str] | None = None,
        after: RunId | None = None,
    ) -> list[Run]:
        """Return the newest runs first, a page after the run ``after`` (``Store.list_runs``)."""
        return self.store.list_runs(
            status=status, limit=limit, input_fields=input_fields, after=after
        )

    def journal(self, run_id: RunId) -> list[StepRecord]:
        """Return the run's journal; ``RunNotFound`` for an unknown run."""
        self.store.get_run(run_id)
        return self.store.load_journal(run_id)

    def attempts(self, run_id: RunId) -> list[AttemptRecord]:
        """Return the run's failed attempts, oldest first."""
        return self.store.list_attempts(run_id)

    def cancel(
        self, run_id: RunId, by: Actor | None = None, *, while_pending: str | None = None
    ) -> Run:
        """Cancel a pending, running or waiting run; its worker can write nothing more.

        Its pending approvals are closed in the same transaction (as cancelled ``by``).
        With ``while_pending`` (one of them) the cancel happens only if that approval is
        still pending in that transaction, else ``ApprovalNotPending`` and nothing changes.
        The observer hears of the end here unless the run was running: then its worker,
        refused its next write, tells its own observer.
        """
        now = self.clock.now()
        run = self.store.get_run(run_id)
        cancelled = replace(run, status=RunStatus.CANCELLED, updated_at=now)
        notices = self.notifier.run_ended(cancelled)
        ended = (
            self.store.cancel(run_id, now, notices)
            if self.approvals is None
            else self.approvals.cancel_run(run_id, by, notices, now, while_pending=while_pending)
        )
        if self.observer is not None and _unheld(run, ended):
            self.observer.run_ended(ended)
        return ended

    def signal(self, run_id: RunId, key: str, data: Any = None) -> Run:
        """Deliver the event ``key`` to the run, waking it if it waits for it.

        Keys starting with ``approval:`` or ``budget:`` are reserved: only a recorded
        decision delivers those.
        """
        if key.startswith(RESERVED_KEYS):
            raise InvalidInput(
                "signal",
                f"event keys starting with {', '.join(RESERVED_KEYS)} "
                "are delivered by decisions only",
            )
        return self.deliver(run_id, key, data)

    def deliver(self, run_id: RunId, key: str, data: Any = None) -> Run:
        """Deliver an event under any key (for the runtime's own services)."""
        value = round_trip(data, what="the event's data")
        return self.store.deliver_event(run_id, key, value, self.clock.now())

    def resume(self, run_id: RunId) -> Run:
        """Make a failed run pending again: it replays its journal with the current code."""
        return self.store.resume(run_id, self.clock.now())

    def worker(self, options: WorkerOptions | None = None) -> Worker:
        """Build a worker over this runtime's store and workflows."""
        return Worker(
            self.store,
            self.workflows,
            options=options,
            clock=self.clock,
            sweeps=self.sweeps,
            notifier=self.notifier,
            observer=self.observer,
        )


def _unheld(before: Run, cancelled: Run) -> bool:
    """Tell whether no worker held the run when it was cancelled (none claimed it meanwhile)."""
    return before.status != RunStatus.RUNNING and cancelled.fence == before.fence + 1
