"""An in-memory Store: the runtime's contract kept in process memory.

Runs here last as long as the process. It serves unit tests, and work that needs a run
context but must leave no trace in the database, such as an eval's re-runs.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from agent_runtime.exceptions import (
    AttemptConflict,
    EventAlreadyDelivered,
    InvalidRunState,
    JournalConflict,
    LeaseLost,
    RunExists,
    RunNotFound,
)
from agent_runtime.ids import RunId
from agent_runtime.notices import DeadNotice, Delivery, Notice, QueuedNotice
from agent_runtime.records import (
    AttemptRecord,
    ErrorInfo,
    Event,
    Fork,
    Lease,
    Run,
    RunStatus,
    StepRecord,
    Wait,
)


class InMemoryStore:
    """A Store kept in process memory, with the same semantics as the SQL stores."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._runs: dict[RunId, Run] = {}
        self._journals: dict[RunId, list[StepRecord]] = {}
        self._attempts: dict[RunId, list[AttemptRecord]] = {}
        self._events: dict[tuple[RunId, str], Event] = {}
        self.outbox = InMemoryOutbox()

    def create_run(
        self,
        run_id: RunId,
        workflow: str,
        input: Any,
        now: datetime,
        notices: Sequence[Notice] = (),
        fork: Fork | None = None,
    ) -> Run:
        """Store a new pending run (with a fork's inherited journal); ``RunExists`` if the id
        is taken."""
        run = Run(
            id=run_id,
            workflow=workflow,
            status=RunStatus.PENDING,
            input=input,
            created_at=now,
            updated_at=now,
            due_at=now,
            forked_from=None if fork is None else fork.source,
            fork_at=None if fork is None else fork.at,
        )
        with self._lock:
            if fork is not None and fork.source not in self._runs:
                raise RunNotFound(fork.source)
            if run_id in self._runs:
                raise RunExists(run_id)
            self._runs[run_id] = run
            self._journals[run_id] = [] if fork is None else list(fork.steps)
            self._attempts[run_id] = []
            self.outbox.enqueue(notices, now)
        return run

    def get_run(self, run_id: RunId) -> Run:
        """Return the run or raise RunNotFound."""
        with self._lock:
            try:
                return self._runs[run_id]
            except KeyError:
                raise RunNotFound(run_id) from None

    def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        limit: int = 100,
        forked_from: RunId | None = None,
        input_fields: Mapping[str, str] | None = None,
        after: RunId | None = None,
    ) -> list[Run]:
        """Return the newest runs first."""
        fields = input_fields or {}
        with self._lock:
            start = None if after is None else self.get_run(after)
            runs = [
                r
                for r in self._runs.values()
                if (status is None or r.status == status)
                and (forked_from is None or r.forked_from == forked_from)
                and all(_at_path(r.input, path) == v for path, v in fields.items())
                and (start is None or (r.created_at, r.id) < (start.created_at, start.id))
            ]
        ordered = sorted(runs, key=lambda r: (r.created_at, r.id), reverse=True)
        return ordered[:limit]

    def claim_runs(
        self, owner: str, *, limit: int, now: datetime, expires_at: datetime
    ) -> list[tuple[Run, Lease]]:
        """Lease up to ``limit`` runnable runs."""
        with self._lock:
            due = sorted(
                (r for r in self._runs.values() if r.due_at is not None and r.due_at <= now),
                key=lambda r: r.due_at or now,
            )[:limit]
            claimed = []
            for run in due:
                new = self._put(
                    run,
                    status=RunStatus.RUNNING,
                    lease_owner=owner,
                    fence=run.fence + 1,
                    due_at=expires_at,
                    updated_at=now,
                )
                took = run.status == RunStatus.RUNNING
                claimed.append((new, Lease(new.id, owner, new.fence, taken_over=took)))
            return claimed

    def renew_lease(self, lease: Lease, expires_at: datetime) -> bool:
        """Extend a held lease."""
        with self._lock:
            run = self._runs.get(lease.run_id)
            if run is None or run.fence != lease.fence or run.status != RunStatus.RUNNING:
                return False
            self._put(run, due_at=expires_at)
            return True

    def renew_leases(self, leases: Sequence[Lease], expires_at: datetime) -> list[Lease]:
        """Extend held leases; return those lost."""
        return [lease for lease in leases if not self.renew_lease(lease, expires_at)]

    def load_journal(self, run_id: RunId) -> list[StepRecord]:
        """Return the journal in position order."""
        with self._lock:
            return list(self._journals.get(run_id, []))

    def append_step(self, lease: Lease, step: StepRecord, notices: Sequence[Notice] = ()) -> None:
        """Append one journal entry under the lease."""
        with self._lock:
            self._check(lease)
            journal = self._journals[lease.run_id]
            if any(s.position == step.position for s in journal):
                raise JournalConflict(lease.run_id, step.position)
            journal.append(step)
            self.outbox.enqueue(notices, step.finished_at)

    def record_attempt(self, lease: Lease, attempt: AttemptRecord) -> None:
        """Record a failed attempt; ``AttemptConflict`` if its number is taken."""
        with self._lock:
            self._check(lease)
            recorded = self._attempts[lease.run_id]
            if any(
                (a.position, a.attempt) == (attempt.position, attempt.attempt) for a in recorded
            ):
                raise AttemptConflict(lease.run_id, attempt.position, attempt.attempt)
            recorded.append(attempt)

    def list_attempts(self, run_id: RunId) -> list[AttemptRecord]:
        """Return the failed attempts."""
        with self._lock:
            return list(self._attempts.get(run_id, []))

    def suspend(self, lease: Lease, wait: Wait, now: datetime) -> RunStatus:
        """Park the run until its wait is satisfied."""
        with self._lock:
            run = self._check(lease)
            if wait.key is not None and (lease.run_id, wait.key) in self._events:
                self._put(
                    run,
                    status=RunStatus.PENDING,
                    lease_owner=None,
                    due_at=now,
                    wait_key=None,
                    updated_at=now,
                )
                return RunStatus.PENDING
            self._put(
                run,
                status=RunStatus.WAITING,
                lease_owner=None,
                due_at=wait.wake_at,
                wait_key=wait.key,
                updated_at=now,
            )
            return RunStatus.WAITING

    def release(self, lease: Lease, now: datetime, due_at: datetime | None = None) -> None:
        """Give the run back for any worker (from ``due_at``, now by default)."""
        with self._lock:
            run = self._check(lease)
            self._put(
                run,
                status=RunStatus.PENDING,
                lease_owner=None,
                due_at=due_at or now,
                updated_at=now,
            )

    def complete(
        self, lease: Lease, output: Any, now: datetime, notices: Sequence[Notice] = ()
    ) -> None:
        """End the run successfully."""
        with self._lock:
            run = self._check(lease)
            self._put(run, status=RunStatus.COMPLETED, output=output, **_ended(now))
            self.outbox.enqueue(notices, now)

    def fail(
        self, lease: Lease, error: ErrorInfo, now: datetime, notices: Sequence[Notice] = ()
    ) -> None:
        """End the run as failed."""
        with self._lock:
            run = self._check(lease)
            self._put(run, status=RunStatus.FAILED, error=error, **_ended(now))
            self.outbox.enqueue(notices, now)

    def cancel(self, run_id: RunId, now: datetime, notices: Sequence[Notice] = ()) -> Run:
        """Cancel an unfinished run and revoke its lease."""
        with self._lock:
            run = self._unfinished(run_id, "cancel")
            self.outbox.enqueue(notices, now)
            return self._put(run, status=RunStatus.CANCELLED, fence=run.fence + 1, **_ended(now))

    def resume(self, run_id: RunId, now: datetime) -> Run:
        """Make a failed run pending again."""
        with self._lock:
            run = self.get_run(run_id)
            if run.status != RunStatus.FAILED:
                raise InvalidRunState(run_id, run.status, "resume")
            return self._put(run, status=RunStatus.PENDING, error=None, due_at=now, updated_at=now)

    def deliver_event(self, run_id: RunId, key: str, data: Any, now: datetime) -> Run:
        """Store an event and wake the run if it waits for it."""
        with self._lock:
            run = self._unfinished(run_id, "signal")
            if (run_id, key) in self._events:
                raise EventAlreadyDelivered(run_id, key)
            self._events[(run_id, key)] = Event(key=key, data=data, delivered_at=now)
            if run.status == RunStatus.WAITING and run.wait_key == key:
                run = self._put(
                    run, status=RunStatus.PENDING, due_at=now, wait_key=None, updated_at=now
                )
            return run

    def get_event(self, run_id: RunId, key: str) -> Event | None:
        """Return the event delivered under ``key``."""
        with self._lock:
            return self._events.get((run_id, key))

    def next_due(self) -> datetime | None:
        """Return the earliest due time."""
        with self._lock:
            return min((r.due_at for r in self._runs.values() if r.due_at), default=None)

    def _check(self, lease: Lease) -> Run:
        run = self._runs.get(lease.run_id)
        if run is None or run.fence != lease.fence or run.status != RunStatus.RUNNING:
            raise LeaseLost(lease.run_id, lease.fence)
        return run

    def _unfinished(self, run_id: RunId, operation: str) -> Run:
        run = self.get_run(run_id)
        if run.status.finished:
            raise InvalidRunState(run_id, run.status, operation)
        return run

    def _put(self, run: Run, **changes: Any) -> Run:
        new = dataclasses.replace(run, **changes)
        self._runs[run.id] = new
        return new


def _ended(now: datetime) -> dict[str, Any]:
    return {"lease_owner": None, "due_at": None, "wait_key": None, "updated_at": now}


class InMemoryOutbox:
    """An Outbox in process memory, with the same ordering and fencing rules as the SQL one."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._items: dict[int, dict[str, Any]] = {}
        self._keys: set[str] = set()

    def enqueue(self, notices: Sequence[Notice], now: datetime) -> None:
        """Queue notices; keys already queued are ignored."""
        with self._lock:
            for notice in notices:
                if notice.key in self._keys:
                    continue
                self._keys.add(notice.key)
                item_id = len(self._items) + 1
                self._items[item_id] = {
                    "notice": notice,
                    "status": "pending",
                    "attempts": 0,
                    "next_at": now,
                    "created_at": now,
                    "delivery": None,
                    "claimed_until": None,
                    "fence": 0,
                    "sending_at": None,
                    "error": None,
                }

    def claim_due(
        self, owner: str, *, now: datetime, until: datetime, limit: int
    ) -> list[QueuedNotice]:
        """Claim due notices, oldest first, one run's notices strictly in order."""
        with self._lock:
            claimed: list[QueuedNotice] = []
            blocked: set[str] = set()
            for item_id, item in sorted(self._items.items()):
                run_id = item["notice"].run_id
                if item["status"] != "pending":
                    continue
                free = item["claimed_until"] is None or item["claimed_until"] <= now
                due = item["next_at"] <= now and free and len(claimed) < limit
                if (run_id is None or run_id not in blocked) and due:
                    claimed.append(self._claim(item_id, item, until))
                if run_id is not None:
                    blocked.add(run_id)
            return claimed

    def _claim(self, item_id: int, item: dict[str, Any], until: datetime) -> QueuedNotice:
        item.update(claimed_until=until, attempts=item["attempts"] + 1, fence=item["fence"] + 1)
        return QueuedNotice(
            id=item_id,
            notice=item["notice"],
            attempts=item["attempts"],
            created_at=item["created_at"],
            fence=item["fence"],
            uncertain=item["sending_at"] is not None,
            sending_since=item["sending_at"],
        )

    def begin_send(self, item: QueuedNotice, *, now: datetime, until: datetime) -> bool:
        """Mark the send begun and extend the claim."""
        with self._lock:
            sending_at = self._items[item.id]["sending_at"] or now
            return self._fenced(item, sending_at=sending_at, claimed_until=until)

    def delivered(self, item: QueuedNotice, delivery: Delivery | None, now: datetime) -> bool:
        """Record a delivery."""
        return self._fenced(
            item, status="sent", delivery=delivery, claimed_until=None, sending_at=None
        )

    def retry_later(
        self, item: QueuedNotice, at: datetime, error: str, *, maybe_sent: bool = False
    ) -> bool:
        """Release for another attempt."""
        with self._lock:
            sending_at = self._items[item.id]["sending_at"] if maybe_sent else None
            return self._fenced(
                item, next_at=at, claimed_until=None, error=error, sending_at=sending_at
            )

    def give_up(self, item: QueuedNotice, error: str) -> bool:
        """Mark the notice dead."""
        return self._fenced(item, status="dead", claimed_until=None, error=error, sending_at=None)

    def delivery_of(self, key: str) -> Delivery | None:
        """Return where ``key`` was delivered."""
        with self._lock:
            for item in self._items.values():
                if item["notice"].key == key and item["status"] == "sent":
                    delivery: Delivery | None = item["delivery"]
                    return delivery
            return None

    def is_dead(self, key: str) -> bool:
        """Tell whether ``key`` was given up."""
        with self._lock:
            return any(
                item["notice"].key == key and item["status"] == "dead"
                for item in self._items.values()
            )

    def dead_notices(self, limit: int) -> list[DeadNotice]:
        """Return the notices given up, newest first."""
        with self._lock:
            dead = [
                item
                for _, item in sorted(self._items.items(), reverse=True)
                if item["status"] == "dead"
            ][:limit]
            return [
                DeadNotice(
                    key=i["notice"].key,
                    run_id=i["notice"].run_id,
                    kind=i["notice"].kind,
                    created_at=i["created_at"],
                    attempts=i["attempts"],
                    error=i["error"],
                )
                for i in dead
            ]

    def _fenced(self, item: QueuedNotice, **values: Any) -> bool:
        with self._lock:
            current = self._items[item.id]
            if current["fence"] != item.fence or current["status"] != "pending":
                return False
            current.update(values)
            return True

    def notices(self) -> list[Notice]:
        """Return every queued notice, oldest first (for tests)."""
        with self._lock:
            return [item["notice"] for _, item in sorted(self._items.items())]


def _at_path(document: Any, path: str) -> Any:
    """Return the value at the dotted ``path`` of a JSON document (None if absent)."""
    for key in path.split("."):
        if not isinstance(document, dict):
            return None
        document = document.get(key)
    return document
