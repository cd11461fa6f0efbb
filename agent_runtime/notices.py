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
    team_id: str = ""
    """The chat workspace the notice goes to ('' where there is only one)."""
    enterprise_id: str = ""
    """The organization of that workspace, where workspaces belong to one ('' otherwise)."""


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
    """A claimed notice, with its delivery state and the claim's fencing token.

    ``fence`` is the claim's token: every later call about the notice passes the
    ``QueuedNotice`` back, and the outbox refuses it once another claim has taken the notice.
    ``uncertain`` says an earlier send began and its outcome was never recorded: the
    message may already be out.
    """

    id: int
    notice: Notice
    attempts: int = 0
    created_at: datetime
    channel: str | None = None
    ts: str | None = None
    fence: int = 0
    uncertain: bool = False
    sending_since: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """Where a delivered notice landed: the channel and the message ``ts`` (for updates)."""

    channel: str
    ts: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadNotice:
    """A notice the outbox stopped trying to deliver, and why."""

    key: str
    run_id: str | None
    kind: str
    created_at: datetime
    attempts: int
    error: str | None


class Outbox(Protocol):
    """The queue of notices awaiting delivery.

    A claim gives one dispatcher a notice for a while and a fencing token; ``begin_send``,
    ``delivered``, ``retry_later`` and ``give_up`` are compare-and-sets on that token and
    return False (changing nothing) for a dispatcher whose claim another has taken since.
    Only ``give_up`` ends a notice undelivered: retrying never exhausts one.
    """

    def enqueue(self, notices: Sequence[Notice], now: datetime) -> None:
        """Queue notices outside any other change (keys already queued are ignored)."""
        ...

    def claim_due(
        self, owner: str, *, now: datetime, until: datetime, limit: int
    ) -> list[QueuedNotice]:
        """Claim up to ``limit`` undelivered notices due at ``now``, oldest first."""
        ...

    def begin_send(self, item: QueuedNotice, *, now: datetime, until: datetime) -> bool:
        """Record that a send begins and hold the claim until ``until``, if it is still ours."""
        ...

    def delivered(self, item: QueuedNotice, delivery: Delivery | None, now: datetime) -> bool:
        """Record a delivery (None when the notice needed no message), if the claim is ours."""
        ...

    def retry_later(
        self, item: QueuedNotice, at: datetime, error: str, *, maybe_sent: bool = False
    ) -> bool:
        """Give the notice back for another attempt at ``at``, if the claim is ours.

        ``maybe_sent`` keeps the send uncertain (a timeout, a dropped connection): the next
        attempt must look for the message before sending it again.
        """
        ...

    def give_up(self, item: QueuedNotice, error: str) -> bool:
        """Stop trying: the notice can never be delivered (kept, with why, for inspection)."""
        ...

    def delivery_of(self, key: str) -> Delivery | None:
        """Return where the notice ``key`` was delivered, if it was."""
        ...

    def is_dead(self, key: str) -> bool:
        """Tell whether the notice ``key`` was given up."""
        ...

    def dead_notices(self, limit: int) -> list[DeadNotice]:
        """Return up to ``limit`` notices given up, newest first."""
        ...
