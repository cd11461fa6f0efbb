"""The run context: every non-deterministic thing a workflow does goes through it and is journaled.

On resume the workflow function is called again from the top; each context call first
looks at the journal position it has reached and, if an entry is there, answers from it
instead of acting. The first position with no entry is where live execution resumes.
"""

from __future__ import annotations

import logging
import threading
import uuid as uuid_module
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from agent_runtime.clock import Clock
from agent_runtime.exceptions import (
    AttemptConflict,
    LeaseLost,
    NonDeterminismError,
    SignoffError,
    StepFailed,
    StepTimeout,
    WaitTimedOut,
)
from agent_runtime.notices import Notifier, Silent
from agent_runtime.observers import StepObserver, guard
from agent_runtime.records import (
    AttemptRecord,
    ErrorInfo,
    Lease,
    Run,
    StepKind,
    StepRecord,
    Wait,
)
from agent_runtime.resume_first import Resuming
from agent_runtime.retry import RetryPolicy
from agent_runtime.serialization import input_hash, round_trip
from agent_runtime.store import Store

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_RETRY = RetryPolicy()
NO_INPUT = input_hash(None)
NO_ARGS = input_hash([])  # the input hash of a step called without arguments


class Suspend(BaseException):
    """Raised by the context to park the run until ``wait`` is satisfied.

    A BaseException so that a workflow's ``except Exception`` cannot swallow it.
    """

    def __init__(self, wait: Wait) -> None:
        super().__init__(wait)
        self.wait = wait


class Abandon(BaseException):
    """Raised by the context when the worker stops: the run is released for another worker."""


class RunContext:
    """What a workflow uses to take steps, read the time, make ids, sleep and wait."""

    def __init__(
        self,
        *,
        run: Run,
        lease: Lease,
        journal: Sequence[StepRecord],
        store: Store,
        clock: Clock,
        stopping: threading.Event,
        notifier: Notifier | None = None,
        observer: StepObserver | None = None,
        resuming: Resuming | None = None,
    ) -> None:
        """``resuming`` (from the worker) counts the run as resuming until it gets to its first
        live step; its later live steps then wait their turn (``agent_runtime.resume_first``)."""
        self.run_id = run.id
        self.workflow = run.workflow
        self._run = run
        self._notifier: Notifier = notifier or Silent()
        self._observer = guard(observer)
        self._lease = lease
        self._journal = journal
        self._store = store
        self._clock = clock
        self._stopping = stopping
        self._position = 0
        self._resuming = resuming
        self.fatal: SignoffError | None = None

    @property
    def run(self) -> Run:
        """The run as it was when this execution claimed it."""
        return self._run

    @property
    def position(self) -> int:
        """Return the journal position the next context call will use."""
        return self._position

    @property
    def replaying(self) -> bool:
        """Tell whether the next context call is answered from the journal."""
        return self._position < len(self._journal)

    def next_step_name(self) -> str | None:
        """Return the name of the journal entry the next context call replays, if any."""
        return self._journal[self._position].name if self.replaying else None

    def step(
        self,
        fn: Callable[..., T],
        *args: Any,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
    ) -> T:
        """Run ``fn(*args)`` once as a journaled step and return its JSON result.

        ``args`` and the result must be JSON values. On replay the journaled result (or
        failure, re-raised as ``StepFailed``) is returned without calling ``fn``.
        """
        step_name = name or str(getattr(fn, "__qualname__", repr(fn)))
        digest = input_hash(list(args)) if args else NO_ARGS
        return self._step(fn, lambda: args, step_name, digest, retry, timeout)

    def step_hashed(
        self,
        fn: Callable[[Any], T],
        make_input: Callable[[], Any],
        digest: str,
        *,
        name: str,
        retry: RetryPolicy | None = None,
        timeout: timedelta | None = None,
    ) -> T:
        """Run ``fn(make_input())`` once as a journaled step whose input hash is ``digest``.

        For an input too large to encode at every step, hashed by the caller as it grows:
        ``make_input`` is called only when the step runs live, never on replay.
        """
        return self._step(fn, lambda: (make_input(),), name, digest, retry, timeout)

    def recorded_input_hash(self) -> str | None:
        """Return the input hash of the journal entry the next context call replays, if any."""
        return self._journal[self._position].input_hash if self.replaying else None

    def _step(
        self,
        fn: Callable[..., T],
        make_args: Callable[[], tuple[Any, ...]],
        name: str,
        digest: str,
        retry: RetryPolicy | None,
        timeout: timedelta | None,
    ) -> T:
        position, record = self._next(StepKind.STEP, name, digest)
        if record is None:
            record = self._run_live(
                position, fn, make_args(), name, digest, retry or DEFAULT_RETRY, timeout
            )
        if record.error is not None:
            raise _step_failed(record)
        result: T = record.output
        return result

    def now(self) -> datetime:
        """Return the current time, fixed in the journal on first call."""
        position, record = self._next(StepKind.NOW, "now", NO_INPUT)
        if record is None:
            now = self._clock.now().isoformat()
            record = self._append_value(position, StepKind.NOW, "now", NO_INPUT, now)
        return datetime.fromisoformat(record.output)

    def uuid(self) -> str:
        """Return a random id (32 hex digits), fixed in the journal on first call."""
        position, record = self._next(StepKind.UUID, "uuid", NO_INPUT)
        if record is None:
            value = uuid_module.uuid4().hex
            record = self._append_value(position, StepKind.UUID, "uuid", NO_INPUT, value)
        output: str = record.output
        return output

    def sleep(self, duration: timedelta) -> None:
        """Pause the run durably: it is parked in the database and resumed by any worker."""
        digest = input_hash(duration.total_seconds())
        position, record = self._next(StepKind.SLEEP, "sleep", digest)
        if record is None:
            until = self._clock.now() + duration
            record = self._append_value(
                position, StepKind.SLEEP, "sleep", digest, until.isoformat()
            )
        wake_at = datetime.fromisoformat(record.output)
        if not self.replaying and self._clock.now() < wake_at:
            raise Suspend(Wait(wake_at=wake_at))

    def wait_for(self, key: str, *, timeout: timedelta | None = None) -> Any:
        """Wait durably for the event ``key`` delivered by any process; return its data.

        Raises ``WaitTimedOut`` when ``timeout`` passes first.
        """
        digest = input_hash(None if timeout is None else timeout.total_seconds())
        position, record = self._next(StepKind.WAIT_DEADLINE, key, digest)
        if record is None:
            deadline = None if timeout is None else (self._clock.now() + timeout).isoformat()
            record = self._append_value(position, StepKind.WAIT_DEADLINE, key, digest, deadline)
        deadline_at = None if record.output is None else datetime.fromisoformat(record.output)
        position, record = self._next(StepKind.WAIT, key, NO_INPUT)
        if record is None:
            record = self._receive(position, key, deadline_at)
        if record.output.get("timed_out"):
            raise WaitTimedOut(key)
        return record.output.get("data")

    def _receive(self, position: int, key: str, deadline: datetime | None) -> StepRecord:
        event = self._store.get_event(self.run_id, key)
        if event is not None:
            return self._append_value(position, StepKind.WAIT, key, NO_INPUT, {"data": event.data})
        if deadline is not None and self._clock.now() >= deadline:
            return self._append_value(position, StepKind.WAIT, key, NO_INPUT, {"timed_out": True})
        raise Suspend(Wait(wake_at=deadline, key=key))

    def check_complete(self) -> None:
        """Raise ``NonDeterminismError`` if the workflow ended before replaying all its journal."""
        self._raise_fatal()
        if self.replaying:
            expected = self._journal[self._position].identity()
            self._fail(NonDeterminismError(self._position, expected, {}))

    def _next(self, kind: StepKind, name: str, digest: str) -> tuple[int, StepRecord | None]:
        self._raise_fatal()
        position = self._position
        self._position += 1
        if position >= len(self._journal):
            if position > len(self._journal) and self._resuming is not None:
                self._resuming.wait_turn()
            if self._stopping.is_set():
                raise Abandon()
            return position, None
        record = self._journal[position]
        found = {"kind": str(kind), "name": name, "input_hash": digest}
        if record.identity() != found and not self._inherited_match(position, record, found):
            self._fail(NonDeterminismError(position, record.identity(), found))
        return position, record

    def _inherited_match(self, position: int, record: StepRecord, found: dict[str, str]) -> bool:
        """An entry a fork inherited was made by the run forked from, perhaps under another
        agent or model: it matches on kind and name, its input may differ."""
        expected = record.identity()
        return self._run.inherits(position) and all(
            expected[k] == found[k] for k in ("kind", "name")
        )

    def _run_live(
        self,
        position: int,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        name: str,
        digest: str,
        retry: RetryPolicy,
        timeout: timedelta | None,
    ) -> StepRecord:
        live = _LiveStep(position, name, digest, self._clock.now())
        failed = self._last_failure(position)
        if failed is not None and retry.gave_up_after(failed):
            return self._append(live.record(self._clock.now(), failed.attempt, error=failed.error))
        if failed is not None:
            self._park_until(retry.retry_at(failed))
        attempt = 1 if failed is None else failed.attempt + 1
        self._resumed()  # the step may take long: the others need not wait for it
        while True:
            try:
                result = _call(fn, args, name, timeout)
                output = round_trip(result, what=f"the output of step {name!r}")
            except Exception as exc:
                failed = AttemptRecord(
                    position=position,
                    attempt=attempt,
                    error=ErrorInfo.of(exc),
                    at=self._clock.now(),
                )
                self._write(self._store.record_attempt, failed)
                if not retry.should_retry(attempt, exc):
                    return self._append(live.record(failed.at, attempt, error=failed.error))
                self._pause_until(retry.retry_at(failed, exc))
                attempt += 1
                continue
            return self._append(live.record(self._clock.now(), attempt, output=output))

    def _last_failure(self, position: int) -> AttemptRecord | None:
        """Return the last failed attempt another execution recorded for the step at ``position``.

        Only the first position past the journal can have one (the step in flight when that
        execution ended), and only if the run was claimed before: a first claim has fence 1.
        """
        if position != len(self._journal) or self._lease.fence <= 1:
            return None
        here = [a for a in self._store.list_attempts(self.run_id) if a.position == position]
        return max(here, key=lambda a: a.attempt, default=None)

    def _pause_until(self, due: datetime) -> None:
        """Wait here until ``due``; a worker told to stop parks the run until then instead."""
        if self._clock.wait(self._stopping, (due - self._clock.now()).total_seconds()):
            raise Suspend(Wait(wake_at=due))

    def _park_until(self, due: datetime) -> None:
        """Park the run until ``due``, unless that time has come."""
        if self._clock.now() < due:
            raise Suspend(Wait(wake_at=due))

    def _append_value(
        self, position: int, kind: StepKind, name: str, digest: str, output: Any
    ) -> StepRecord:
        now = self._clock.now()
        return self._append(
            StepRecord(
                position=position,
                kind=kind,
                name=name,
                input_hash=digest,
                output=output,
                started_at=now,
                finished_at=now,
            )
        )

    def _append(self, record: StepRecord) -> StepRecord:
        notices = self._notifier.step_committed(self._run, record)
        try:
            self._store.append_step(self._lease, record, notices)
        except LeaseLost as exc:
            self._fail(exc)
        self._resumed()
        logger.debug(
            "step committed",
            extra={"action": "step", "run_id": self.run_id, "step": record.position},
        )
        if self._observer is not None:
            self._observer.step_committed(self._run, record)
        return record

    def _resumed(self) -> None:
        """The run has got to its first live step: the worker's other runs may go on."""
        if self._resuming is not None:
            self._resuming.done()

    def _write(self, write: Callable[[Lease, Any], None], record: Any) -> None:
        try:
            write(self._lease, record)
        except (LeaseLost, AttemptConflict) as exc:
            self._fail(exc)

    def _fail(self, error: SignoffError) -> None:
        self.fatal = error
        raise error

    def _raise_fatal(self) -> None:
        if self.fatal is not None:
            raise self.fatal


@dataclass(frozen=True, slots=True)
class _LiveStep:
    """What a step run live records whatever its outcome: position, name, input, start."""

    position: int
    name: str
    digest: str
    started: datetime

    def record(
        self,
        finished: datetime,
        attempts: int,
        *,
        output: Any = None,
        error: ErrorInfo | None = None,
    ) -> StepRecord:
        """Return the journal entry of the step's outcome after ``attempts`` attempts."""
        return StepRecord(
            position=self.position,
            kind=StepKind.STEP,
            name=self.name,
            input_hash=self.digest,
            output=output,
            error=error,
            attempts=attempts,
            started_at=self.started,
            finished_at=finished,
        )


def _call(
    fn: Callable[..., Any], args: tuple[Any, ...], name: str, timeout: timedelta | None
) -> Any:
    if timeout is None:
        return fn(*args)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn(*args)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"step:{name}", daemon=True)
    thread.start()
    thread.join(timeout.total_seconds())
    if thread.is_alive():
        raise StepTimeout(name, timeout.total_seconds())
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _step_failed(record: StepRecord) -> StepFailed:
    assert record.error is not None
    return StepFailed(record.name, record.error.type, record.error.message, record.attempts)
