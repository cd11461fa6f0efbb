"""Notices: what the outside world should be told about a state change, committed with it.

The runtime asks a ``Notifier`` for the notices a change causes and the store writes them
in the same transaction as the change (a transactional outbox). A dispatcher outside the
runtime delivers them — to Slack, say — at least once; each notice's ``key`` is unique, so a
change retried after a crash never queues the same notice twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from agent_runtime.approvals import Approval
from agent_runtime.records import Run, StepRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """One message to deliver: a unique key, what happened, and a JSON snapshot of it."""

    key: str
    run_id: str | None
    kind: str
    data: dict[str, Any] = field(default_factory=dict)


class Notifier(Protocol):
    """Decides which notices each change causes. Must be a pure function of its arguments."""

    def run_started(self, run: Run) -> Sequence[Notice]:
        """Notices for a new run."""
        ...

    def step_committed(self, run: Run, step: StepRecord) -> Sequence[Notice]:
        """Notices for a journal entry."""
        ...

    def run_ended(self, run: Run) -> Sequence[Notice]:
        """Notices for a run that completed or failed (``run`` shows its final state)."""
        ...

    def approval_changed(self, approval: Approval, action: str) -> Sequence[Notice]:
        """Notices for an approval requested, decided, escalated, reminded or expired."""
        ...


class Silent:
    """A notifier that tells nobody anything (the default)."""

    def run_started(self, run: Run) -> Sequence[Notice]:
        """No notices."""
        return ()

    def step_committed(self, run: Run, step: StepRecord) -> Sequence[Notice]:
        """No notices."""
        return ()

    def run_ended(self, run: Run) -> Sequence[Notice]:
        """No notices."""
        return ()

    def approval_changed(self, approval: Approval, action: str) -> Sequence[Notice]:
        """No notices."""
        return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedNotice:
    """A notice in the outbox, with its delivery state."""

    id: int
    notice: Notice
    attempts: int = 0
    created_at: datetime
    channel: str | None = None
    ts: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """Where a delivered notice landed: the channel and the message ``ts`` (for updates)."""

    channel: str
    ts: str


class Outbox(Protocol):
    """The queue of notices awaiting delivery. Claims keep N dispatchers from double work."""

    def enqueue(self, notices: Sequence[Notice], now: datetime) -> None:
        """Queue notices outside any other change (keys already queued are ignored)."""
        ...

    def claim_due(self, owner: str, *, now: datetime, until: datetime, limit: int) -> list[
        QueuedNotice
    ]:
        """Claim up to ``limit`` undelivered notices due at ``now``, oldest first."""
        ...

    def delivered(self, item_id: int, delivery: Delivery | None, now: datetime) -> None:
        """Record a delivery (None when the notice needed no message)."""
        ...

    def retry_later(self, item_id: int, at: datetime, error: str) -> None:
        """Give the notice back for another attempt at ``at``."""
        ...

    def give_up(self, item_id: int, error: str) -> None:
        """Stop trying: the notice can never be delivered (kept, with why, for inspection)."""
        ...

    def delivery_of(self, key: str) -> Delivery | None:
        """Return where the notice ``key`` was delivered, if it was."""
        ...
