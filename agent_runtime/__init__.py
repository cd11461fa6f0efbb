"""Signoff's durable agent runtime: journaled workflows resumed on any worker."""

from agent_runtime.agent import Agent, AgentInput, AgentNotFound, Agents
from agent_runtime.approval_service import Approvals, DecisionResult, ToolLookup
from agent_runtime.approvals import Actor, Approval, ApprovalId, ApprovalStatus, Decision
from agent_runtime.budget import Budget, Price, PriceTable
from agent_runtime.clock import Clock, SystemClock
from agent_runtime.context import RunContext
from agent_runtime.deployment import Deployment
from agent_runtime.exceptions import (
    ApprovalNotFound,
    ApprovalNotPending,
    AttemptConflict,
    EventAlreadyDelivered,
    InvalidConfiguration,
    InvalidInput,
    InvalidRunState,
    JournalConflict,
    LeaseLost,
    ModelError,
    NonDeterminismError,
    NotSerializable,
    RunNotFound,
    SignoffError,
    StepFailed,
    StepTimeout,
    StoreUnavailable,
    UserError,
    WaitTimedOut,
    WorkflowNotFound,
)
from agent_runtime.ids import RunId, new_run_id, parse_run_id
from agent_runtime.observers import StepObserver
from agent_runtime.policy import ApprovalPolicy, OnExpiry
from agent_runtime.records import (
    AttemptRecord,
    ErrorInfo,
    Event,
    Fork,
    Lease,
    Run,
    RunStatus,
    StepKind,
    StepRecord,
    Wait,
)
from agent_runtime.retry import NO_RETRY, RetryPolicy
from agent_runtime.runtime import Runtime
from agent_runtime.store import ApprovalStore, Store
from agent_runtime.tools import Tool, Tools, UnknownOutcome, tool
from agent_runtime.worker import Worker, WorkerOptions
from agent_runtime.workflows import Workflows

__all__ = [
    "NO_RETRY",
    "Actor",
    "Agent",
    "AgentInput",
    "AgentNotFound",
    "Agents",
    "Approval",
    "ApprovalId",
    "ApprovalNotFound",
    "ApprovalNotPending",
    "ApprovalPolicy",
    "ApprovalStatus",
    "ApprovalStore",
    "Approvals",
    "AttemptConflict",
    "AttemptRecord",
    "Budget",
    "Clock",
    "Decision",
    "DecisionResult",
    "Deployment",
    "ErrorInfo",
    "Event",
    "EventAlreadyDelivered",
    "Fork",
    "InvalidConfiguration",
    "InvalidInput",
    "InvalidRunState",
    "JournalConflict",
    "Lease",
    "LeaseLost",
    "ModelError",
    "NonDeterminismError",
    "NotSerializable",
    "OnExpiry",
    "Price",
    "PriceTable",
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
    "StepObserver",
    "StepRecord",
    "StepTimeout",
    "Store",
    "StoreUnavailable",
    "SystemClock",
    "Tool",
    "ToolLookup",
    "Tools",
    "UnknownOutcome",
    "UserError",
    "Wait",
    "WaitTimedOut",
    "Worker",
    "WorkerOptions",
    "WorkflowNotFound",
    "Workflows",
    "new_run_id",
    "parse_run_id",
    "tool",
]
