"""Trace and span ids derived from a run: the same run always gets the same ids."""

from __future__ import annotations

import hashlib
from collections import deque

from opentelemetry.sdk.trace.id_generator import IdGenerator

from agent_runtime import RunId


def trace_id_for(run_id: RunId) -> int:
    """Return the trace id of a run: its 32 hex digits read as a 128-bit number."""
    return int(run_id, 16)


def span_id_for(run_id: RunId, position: int | None = None) -> int:
    """Return the span id of a run's journal entry at ``position`` (of the run itself if None)."""
    label = "run" if position is None else str(position)
    digest = hashlib.sha256(f"{run_id}:{label}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


class JournalIds(IdGenerator):
    """Hands a tracer the ids of one run's spans, in the order the spans are started."""

    def __init__(self, run_id: RunId) -> None:
        self._trace_id = trace_id_for(run_id)
        self._run_id = run_id
        self._next: deque[int] = deque()

    def expect(self, position: int | None) -> None:
        """Make the next span started the one of ``position`` (the run span if None)."""
        self._next.append(span_id_for(self._run_id, position))

    def generate_span_id(self) -> int:
        """Return the id of the span being started."""
        return self._next.popleft()

    def generate_trace_id(self) -> int:
        """Return the run's trace id."""
        return self._trace_id
