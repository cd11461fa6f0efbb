"""What tests of agents need: a test environment, a frozen clock, in-memory stores."""

from __future__ import annotations

from agent_runtime.clock import FrozenClock
from agent_runtime.environment import AgentEnvironment, ToolCallRecord
from agent_runtime.memory_approvals import InMemoryApprovalStore
from agent_runtime.memory_store import InMemoryOutbox, InMemoryStore

__all__ = [
    "AgentEnvironment",
    "FrozenClock",
    "InMemoryApprovalStore",
    "InMemoryOutbox",
    "InMemoryStore",
    "ToolCallRecord",
]
