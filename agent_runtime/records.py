"""The data the runtime keeps about runs: plain frozen values passed to and from a Store."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.ids import RunId


class RunStatus(enum.StrEnum):
    """Where a run is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        """Tell whether the run can no longer change on its own."""
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class StepKind(enum.StrEnum):
    """What a journal entry records."""

    STEP = "step"
    NOW = "now"
    UUID = "uuid"
    SLEEP = "sleep"
    WAIT_DEADLINE = "wait.deadline"
    WAIT = "wait"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """An error as the journal keeps it."""

    type: str
    message: str
    details: dict[str, Any] | None = None

    @classmethod
    def of(cls, error: BaseException) -> ErrorInfo:
        """Describe ``error`` by its class name and message."""
        return cls(type=type(error).__name__, message=str(error))

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form stored in the database."""
        data: dict[str, Any] = {"type": self.type, "message": self.message}
        if self.details:
            data["details"] = self.details
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ErrorInfo:
        """Read back the form written by ``to_json``."""
        return cls(type=data["type"], message=data["message"], details=data.get("details"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """A run as stored."""

    id: RunId
    workflow: str
    status: RunStatus
    input: Any
    output: Any = None
    error: ErrorInfo | None = None
    created_at: datetime
    updated_at: datetime
    due_at: datetime | None = None
    wait_key: str | None = None
    lease_owner: str | None = None
    fence: int = 0
    forked_from: RunId | None = None
    fork_at: int | None = None
    """A fork starts from ``forked_from``'s journal entries before ``fork_at`` (and, when its
    result was replaced, the entry at ``fork_at``): replay matches those by kind and name."""

    def inherits(self, position: int) -> bool:
        """Tell whether the entry at ``position`` was inherited from the run forked from."""
        return self.fork_at is not None and position <= self.fork_at


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRecord:
    """One committed journal entry: the result of the step at ``position``."""

    position: int
    kind: StepKind
    name: str
    input_hash: str
    output: Any = None
    error: ErrorInfo | None = None
    attempts: int = 1
    started_at: datetime
    finished_at: datetime

    def identity(self) -> dict[str, Any]:
        """Return what replay compares: kind, name and input hash."""
        return {"kind": str(self.kind), "name": self.name, "input_hash": self.input_hash}


@dataclass(frozen=True, slots=True, kw_only=True)
class Fork:
    """Where a new run starts from: the journal of ``source`` up to ``at``.

    ``steps`` are the entries the fork inherits: positions ``0 .. at-1``, plus ``at`` when
    that entry's recorded result is replaced.
    """

    source: RunId
    at: int
    steps: tuple[StepRecord, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptRecord:
    """A failed attempt of the step at ``position``."""

    position: int
    attempt: int
    error: ErrorInfo
    at: datetime


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's right to advance a run; every write names the fence it holds."""

    run_id: RunId
    owner: str
    fence: int
    taken_over: bool = False
    """The claim took the run from a worker whose lease had lapsed (it was still running)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    """Why a suspended run waits: until ``wake_at``, for event ``key``, or both."""

    wake_at: datetime | None
    key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Data delivered to a run under a key."""

    key: str
    data: Any
    delivered_at: datetime
