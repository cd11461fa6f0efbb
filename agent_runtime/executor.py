"""Drive one leased run: replay its journal, continue live, and record how it ended."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from agent_runtime.clock import Clock
from agent_runtime.context import Abandon, RunContext, Suspend
from agent_runtime.exceptions import (
    LeaseLost,
    NonDeterminismError,
    SignoffError,
    StoreUnavailable,
    WorkflowNotFound,
)
from agent_runtime.notices import Notifier, Silent
from agent_runtime.observers import StepObserver, guard
from agent_runtime.records import ErrorInfo, Lease, Run, RunStatus, StepRecord
from agent_runtime.resume_first import ResumeFirst
from agent_runtime.serialization import round_trip
from agent_runtime.store import Store
from agent_runtime.workflows import WorkflowFn, Workflows

logger = logging.getLogger(__name__)

AFTER_AN_OUTAGE = timedelta(seconds=0.5)
"""How long a run whose store call failed waits before any worker may resume it: one cut
connection does not hold it for its whole lease, and a store that keeps failing the run's
writes while it answers claims does not have the run retried as fast as it can."""


class RunExecutor:
    """Executes leased runs against one store and one set of workflows.

    An ``observer`` hears of each entry committed and of each run that ends here: completed,
    failed, or found cancelled when a write is refused.
    """

    def __init__(
        self,
        store: Store,
        workflows: Workflows,
        clock: Clock,
        stopping: threading.Event,
        notifier: Notifier | None = None,
        observer: StepObserver | None = None,
        turns: ResumeFirst | None = None,
    ) -> None:
        """With ``turns``, the later steps of the runs executed here give way to the runs
        still getting to their first live step (``agent_runtime.resume_first``)."""
        self._store = store
        self._workflows = workflows
        self._clock = clock
        self._stopping = stopping
        self._notifier: Notifier = notifier or Silent()
        self._observer = guard(observer)
        self._turns = turns

    def execute(self, run: Run, lease: Lease) -> RunStatus | None:
        """Advance ``run`` as far as it goes; return its new status, None if the lease was lost."""
        try:
            return self._advance(run, lease)
        except LeaseLost:
            logger.info("lease lost", extra={"action": "abandon", "run_id": run.id})
            self._observe_cancelled(run)
        except StoreUnavailable:
            logger.warning("store unavailable", extra={"action": "abandon", "run_id": run.id})
            self._give_back(lease)
        return None

    def _give_back(self, lease: Lease) -> None:
        """Release the run for a retry after ``AFTER_AN_OUTAGE``; if the store cannot take
        even that, the lease lapses and another worker takes the run over as before."""
        now = self._clock.now()
        try:
            self._store.release(lease, now, due_at=now + AFTER_AN_OUTAGE)
        except (LeaseLost, StoreUnavailable):
            return

    def _advance(self, run: Run, lease: Lease) -> RunStatus:
        try:
            workflow = self._workflows.get(run.workflow)
        except WorkflowNotFound as exc:
            return self._fail(run, lease, ErrorInfo.of(exc))
        resuming = None if self._turns is None else self._turns.resuming()
        try:
            if resuming is not None:
                resuming.replay_turn()
            context = RunContext(
                run=run,
                lease=lease,
                journal=self._journal(run, lease),
                store=self._store,
                clock=self._clock,
                stopping=self._stopping,
                notifier=self._notifier,
                observer=self._observer,
                resuming=resuming,
            )
            return self._run(workflow, context, run, lease)
        finally:
            if resuming is not None:
                resuming.done()

    def _run(self, workflow: WorkflowFn, context: RunContext, run: Run, lease: Lease) -> RunStatus:
        try:
            output = workflow(context, run.input)
            context.check_complete()
            output = round_trip(output, what="the workflow's output")
        except Suspend as suspend:
            return self._store.suspend(lease, suspend.wait, self._clock.now())
        except Abandon:
            self._store.release(lease, self._clock.now())
            return RunStatus.PENDING
        except Exception as exc:
            return self._handle_error(context, lease, exc)
        now = self._clock.now()
        ended = _ended(run, RunStatus.COMPLETED, now, output=output)
        self._store.complete(lease, output, now, self._notifier.run_ended(ended))
        self._observe_end(ended)
        return RunStatus.COMPLETED

    def _journal(self, run: Run, lease: Lease) -> list[StepRecord]:
        """The run's journal; a run's first lease (fence 1) finds it empty, unless it is a
        fork's (entries are only ever written under a lease, or inherited by a fork)."""
        if lease.fence == 1 and run.forked_from is None:
            return []
        return self._store.load_journal(run.id)

    def _handle_error(self, context: RunContext, lease: Lease, exc: Exception) -> RunStatus:
        error = context.fatal or exc
        if isinstance(error, LeaseLost | StoreUnavailable):
            raise error
        return self._fail(context.run, lease, _describe(error))

    def _fail(self, run: Run, lease: Lease, error: ErrorInfo) -> RunStatus:
        now = self._clock.now()
        ended = _ended(run, RunStatus.FAILED, now, error=error)
        self._store.fail(lease, error, now, self._notifier.run_ended(ended))
        logger.info("run failed", extra={"action": "fail", "run_id": lease.run_id})
        self._observe_end(ended)
        return RunStatus.FAILED

    def _observe_end(self, run: Run) -> None:
        if self._observer is not None:
            self._observer.run_ended(run)

    def _observe_cancelled(self, run: Run) -> None:
        """A write was refused: if it is because the run was cancelled, that is its end."""
        if self._observer is None:
            return
        try:
            current = self._store.get_run(run.id)
        except SignoffError:
            return
        if current.status == RunStatus.CANCELLED:
            self._observer.run_ended(current)


def _ended(run: Run, status: RunStatus, now: datetime, **changes: Any) -> Run:
    """Return ``run`` as the store keeps it once ended: no lease, no wait, updated ``now``."""
    return replace(
        run, status=status, updated_at=now, lease_owner=None, due_at=None, wait_key=None, **changes
    )


def _describe(error: BaseException) -> ErrorInfo:
    if isinstance(error, NonDeterminismError):
        details = {"position": error.position, "expected": error.expected, "found": error.found}
        return ErrorInfo(type=type(error).__name__, message=str(error), details=details)
    if isinstance(error, SignoffError):
        return ErrorInfo(type=type(error).__name__, message=str(error))
    return ErrorInfo.of(error)
