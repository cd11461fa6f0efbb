"""The events on a journal entry's span: its failed attempts and the approval it records.

Failed attempts become ``exception`` events; an approval request ``approval.requested`` and
the wait that received the decision ``approval.decided``, taken from the stored approval
or, when it is no longer stored, from what the journal recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opentelemetry.util.types import AttributeValue

from agent_runtime import Approval, AttemptRecord, StepKind, StepRecord

Attributes = dict[str, AttributeValue]

REQUEST_PREFIX = "approval.request:"


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """A span event to add: its name, time and attributes."""

    name: str
    at: datetime
    attributes: Attributes = field(default_factory=dict)


def attempt_events(attempts: Sequence[AttemptRecord], position: int) -> list[SpanEvent]:
    """Return the failed attempts of the entry at ``position`` as ``exception`` events."""
    return [
        SpanEvent(
            "exception",
            attempt.at,
            {
                "exception.type": attempt.error.type,
                "exception.message": attempt.error.message,
                "signoff.attempt": attempt.attempt,
            },
        )
        for attempt in attempts
        if attempt.position == position
    ]


def approval_id_of(step: StepRecord) -> str | None:
    """Return the id of the approval a journal entry requests or received, if any."""
    output = _output(step)
    if step.kind == StepKind.STEP and step.name.startswith(REQUEST_PREFIX):
        return str(output["approval_id"]) if "approval_id" in output else None
    data = output.get("data")
    if step.kind == StepKind.WAIT and isinstance(data, dict) and "approval_id" in data:
        return str(data["approval_id"])
    return None


def approval_events(step: StepRecord, approvals: Mapping[str, Approval]) -> list[SpanEvent]:
    """Return the approval request or decision a journal entry records, if any."""
    approval_id = approval_id_of(step)
    if approval_id is None:
        return []
    approval = approvals.get(approval_id)
    if step.kind == StepKind.WAIT:
        return [_decided(approval) if approval else _decided_as_received(step)]
    return [_requested(approval) if approval else _requested_as_recorded(step)]


def _output(step: StepRecord) -> dict[str, Any]:
    return step.output if isinstance(step.output, dict) else {}


def _requested(approval: Approval) -> SpanEvent:
    return SpanEvent(
        "approval.requested",
        approval.requested_at,
        _present(
            {
                "signoff.approval.id": approval.id,
                "signoff.approval.tool": approval.tool,
                "signoff.approval.kind": approval.kind.value,
                "signoff.approval.requested_by": approval.requester.label,
                "signoff.approval.args_hash": approval.args_hash,
                "signoff.approval.deadline": approval.deadline.isoformat(),
            }
        ),
    )


def _requested_as_recorded(step: StepRecord) -> SpanEvent:
    """The request as the journal recorded it, when its approval is no longer stored."""
    output = _output(step)
    return SpanEvent(
        "approval.requested",
        step.finished_at,
        _present(
            {
                "signoff.approval.id": str(output["approval_id"]),
                "signoff.approval.tool": step.name.removeprefix(REQUEST_PREFIX),
                "signoff.approval.deadline": output.get("deadline"),
            }
        ),
    )


def _decided(approval: Approval) -> SpanEvent:
    by = approval.decided_by
    return SpanEvent(
        "approval.decided",
        approval.decided_at or approval.requested_at,
        _present(
            {
                "signoff.approval.id": approval.id,
                "signoff.approval.tool": approval.tool,
                "signoff.approval.decision": approval.status.value,
                "signoff.approval.decided_by": None if by is None else by.label,
                "signoff.approval.decided_by.id": None if by is None else by.user_id,
                "signoff.approval.args_hash": approval.decided_args_hash or approval.args_hash,
                "signoff.approval.reason": approval.reason,
            }
        ),
    )


def _decided_as_received(step: StepRecord) -> SpanEvent:
    """The decision as the journal recorded it, when its approval is no longer stored."""
    data: dict[str, Any] = _output(step)["data"]
    return SpanEvent(
        "approval.decided",
        step.started_at,
        _present(
            {
                "signoff.approval.id": str(data["approval_id"]),
                "signoff.approval.decision": data.get("status"),
                "signoff.approval.args_hash": data.get("args_hash"),
                "signoff.approval.reason": data.get("reason"),
            }
        ),
    )


def _present(values: Mapping[str, AttributeValue | None]) -> Attributes:
    """Drop the attributes that have no value."""
    return {key: value for key, value in values.items() if value is not None}
