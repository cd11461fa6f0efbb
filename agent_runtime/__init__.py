"""Signoff's durable agent runtime: journaled workflows resumed on any worker."""

from agent_runtime.clock import Clock, SystemClock
from agent_runtime.context import RunContext
from agent_runtime.exceptions import (
    EventAlreadyDelivered,
    InvalidInput,
    InvalidRunState,
    JournalConflict,
    LeaseLost,
    NonDeterminismError,
    NotSerializable,
    RunNotFound,
    SignoffError,
    StepFailed,
    StepTimeout,
    StoreUnavailable,
    WaitTimedOut,
    WorkflowNotFound,
)
from agent_runtime.ids import RunId, new_run_id, parse_run_id
from agent_runtime.records import (
    AttemptRecord,
    ErrorInfo,
    Event,
    Lease,
    Run,
    RunStatus,
    StepKind,
    StepRecord,
    Wait,
)
from agent_runtime.retry import NO_RETRY, RetryPolicy
from agent_runtime.runtime import Runtime
from agent_runtime.store import Store
from agent_runtime.worker import Worker, WorkerOptions
from agent_runtime.workflows import Workflows

__all__ = [
    "NO_RETRY",
    "AttemptRecord",
    "Clock",
    "ErrorInfo",
    "Event",
    "EventAlreadyDelivered",
    "InvalidInput",
    "InvalidRunState",
    "JournalConflict",
    "Lease",
    "LeaseLost",
    "NonDeterminismError",
    "NotSerializable",
    "RetryPolicy",
    "Run",
    "RunContext",
    "RunId",
    "RunNotFound",
    "RunStatus",
    "Runtime",
    "SignoffError",
    "StepFailed",
    "StepKind",
    "StepRecord",
    "StepTimeout",
    "Store",
    "StoreUnavailable",
    "SystemClock",
    "Wait",
    "WaitTimedOut",
    "Worker",
    "WorkerOptions",
    "WorkflowNotFound",
    "Workflows",
    "new_run_id",
    "parse_run_id",
]
