"""Signoff's durable agent runtime: journaled workflows resumed on any worker.

Each public name is imported from its module when first used, so that importing one part
(``from agent_runtime import RunStatus``) does not load the rest (the agent loop, the tools
and their JSON Schema validator): the command line starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_runtime.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from agent_runtime.agent import Agent, AgentInput, AgentNotFound, Agents
    from agent_runtime.approval_service import Approvals, DecisionResult
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
        RunExists,
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
    from agent_runtime.tool_lookup import ToolLookup
    from agent_runtime.tools import Tool, Tools, UnknownOutcome, tool
    from agent_runtime.worker import Worker, WorkerOptions
    from agent_runtime.workflows import Workflows

_MODULE_OF = {
    "Agent": "agent",
    "AgentInput": "agent",
    "AgentNotFound": "agent",
    "Agents": "agent",
    "Approvals": "approval_service",
    "DecisionResult": "approval_service",
    "ToolLookup": "tool_lookup",
    "Actor": "approvals",
    "Approval": "approvals",
    "ApprovalId": "approvals",
    "ApprovalStatus": "approvals",
    "Decision": "approvals",
    "Budget": "budget",
    "Price": "budget",
    "PriceTable": "budget",
    "Clock": "clock",
    "SystemClock": "clock",
    "RunContext": "context",
    "Deployment": "deployment",
    "ApprovalNotFound": "exceptions",
    "ApprovalNotPending": "exceptions",
    "AttemptConflict": "exceptions",
    "EventAlreadyDelivered": "exceptions",
    "InvalidConfiguration": "exceptions",
    "InvalidInput": "exceptions",
    "InvalidRunState": "exceptions",
    "JournalConflict": "exceptions",
    "LeaseLost": "exceptions",
    "ModelError": "exceptions",
    "NonDeterminismError": "exceptions",
    "NotSerializable": "exceptions",
    "RunExists": "exceptions",
    "RunNotFound": "exceptions",
    "SignoffError": "exceptions",
    "StepFailed": "exceptions",
    "StepTimeout": "exceptions",
    "StoreUnavailable": "exceptions",
    "UserError": "exceptions",
    "WaitTimedOut": "exceptions",
    "WorkflowNotFound": "exceptions",
    "RunId": "ids",
    "new_run_id": "ids",
    "parse_run_id": "ids",
    "StepObserver": "observers",
    "ApprovalPolicy": "policy",
    "OnExpiry": "policy",
    "Preview": "previews",
    "AttemptRecord": "records",
    "ErrorInfo": "records",
    "Event": "records",
    "Fork": "records",
    "Lease": "records",
    "Run": "records",
    "RunStatus": "records",
    "StepKind": "records",
    "StepRecord": "records",
    "Wait": "records",
    "NO_RETRY": "retry",
    "RetryPolicy": "retry",
    "Runtime": "runtime",
    "ApprovalStore": "store",
    "Store": "store",
    "Tool": "tools",
    "Tools": "tools",
    "UnknownOutcome": "tools",
    "tool": "tools",
    "Worker": "worker",
    "WorkerOptions": "worker",
    "Workflows": "workflows",
}
"""The module (under ``agent_runtime``) of each public name."""


__getattr__ = lazy_exports(__name__, _MODULE_OF, globals())


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
    "Preview",
    "Price",
    "PriceTable",
    "RetryPolicy",
    "Run",
    "RunContext",
    "RunExists",
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
