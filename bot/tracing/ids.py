"""Trace and span ids derived from a run: the same run always gets the same ids."""

from __future__ import annotations

import hashlib
import threading

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
    """Hands a tracer the ids of the span it starts: those ``expect`` planned in that thread."""

    def __init__(self) -> None:
        self._planned = threading.local()

    def expect(self, run_id: RunId, position: int | None) -> None:
        """Make this thread's next span that of entry ``position`` of ``run_id`` (None: the run)."""
        self._planned.ids = (trace_id_for(run_id), span_id_for(run_id, position))

    def generate_span_id(self) -> int:
        """Return the id of the span being started."""
        ids: tuple[int, int] = self._planned.ids
        return ids[1]

    def generate_trace_id(self) -> int:
        """Return the trace id of the run whose span is being started."""
        ids: tuple[int, int] = self._planned.ids
        return ids[0]
