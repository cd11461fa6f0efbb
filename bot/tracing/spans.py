"""A run's journal as OpenTelemetry spans: one span for the run, one child span per entry.

Model calls follow the GenAI semantic conventions (``chat <model>``, token usage, finish
reasons) and tool calls are ``execute_tool <tool>``. Failed attempts become ``exception``
events, approval requests and decisions ``approval.requested`` and ``approval.decided``
events. Ids come from the run id and the journal position, so a run always gets the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import (
    Link,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from opentelemetry.util.types import AttributeValue

from agent_runtime import Approval, AttemptRecord, ErrorInfo, Run, RunStatus, StepKind, StepRecord
from agent_runtime.budget_control import model_call_of
from bot.tracing.ids import JournalIds, span_id_for, trace_id_for

SERVICE_NAME = "signoff"
SCOPE = "signoff.journal"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Attributes = dict[str, AttributeValue]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunJournal:
    """Everything a run's trace is made of, as the store keeps it."""

    run: Run
    steps: Sequence[StepRecord]
    attempts: Sequence[AttemptRecord] = ()
    approvals: Sequence[Approval] = ()


@dataclass(frozen=True, slots=True)
class _Event:
    """A span event to add: its name, time and attributes."""

    name: str
    at: datetime
    attributes: Attributes = field(default_factory=dict)


def run_spans(journal: RunJournal) -> tuple[ReadableSpan, ...]:
    """Return the run's spans: the run span first, then one per journal entry in order."""
    ids = JournalIds(journal.run.id)
    memory = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_ON, resource=_resource(), shutdown_on_exit=False,
                              id_generator=ids)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _emit(provider.get_tracer(SCOPE), ids, journal)
    finished = memory.get_finished_spans()
    provider.shutdown()
    return (*finished[-1:], *finished[:-1])


def _resource() -> Resource:
    """``service.name`` signoff, plus what ``OTEL_RESOURCE_ATTRIBUTES`` adds (no random ids)."""
    return OTELResourceDetector().detect().merge(Resource({"service.name": SERVICE_NAME}))


def export_run(journal: RunJournal, exporter: SpanExporter) -> SpanExportResult:
    """Hand the run's spans to ``exporter`` as one batch and return its result."""
    return exporter.export(run_spans(journal))


def _emit(tracer: Tracer, ids: JournalIds, journal: RunJournal) -> None:
    run = journal.run
    ids.expect(None)
    root = tracer.start_span(f"run {run.workflow}", attributes=_run_attributes(run),
                             links=_fork_links(run), start_time=_ns(run.created_at))
    if run.status == RunStatus.FAILED:
        root.set_status(Status(StatusCode.ERROR, _describe_error(run.error)))
    parent = trace.set_span_in_context(root)
    failures = _attempts_by_position(journal.attempts)
    approvals: dict[str, Approval] = {a.id: a for a in journal.approvals}
    for step in journal.steps:
        ids.expect(step.position)
        events = [*failures.get(step.position, ()), *_approval_events(step, approvals)]
        _step_span(tracer, parent, step, events)
    root.end(end_time=max(_ns(run.created_at), _ns(_run_end(run, journal.steps))))


def _run_attributes(run: Run) -> Attributes:
    attributes: Attributes = {"signoff.run.id": run.id, "signoff.run.workflow": run.workflow,
                              "signoff.run.status": run.status.value}
    if run.wait_key:
        attributes["signoff.run.wait_key"] = run.wait_key
    if run.error is not None:
        attributes["error.type"] = run.error.type
    if run.forked_from is not None:
        attributes["signoff.run.forked_from"] = run.forked_from
    if run.fork_at is not None:
        attributes["signoff.run.fork_at"] = run.fork_at
    return attributes


def _fork_links(run: Run) -> list[Link]:
    """Link a fork's span to the span of the run it was forked from."""
    if run.forked_from is None:
        return []
    origin = SpanContext(trace_id_for(run.forked_from), span_id_for(run.forked_from),
                         is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return [Link(origin, {"signoff.link": "forked_from"})]


def _run_end(run: Run, steps: Sequence[StepRecord]) -> datetime:
    """A finished run ends when it was last updated; any other run at its last entry."""
    if run.status.finished or not steps:
        return run.updated_at
    return steps[-1].finished_at


def _step_span(tracer: Tracer, parent: Context, step: StepRecord, events: list[_Event]) -> None:
    name, kind, attributes = _describe_step(step)
    span = tracer.start_span(name, context=parent, kind=kind, attributes=attributes,
                             start_time=_ns(step.started_at))
    for event in events:
        span.add_event(event.name, event.attributes, timestamp=_ns(event.at))
    if step.error is not None:
        span.set_status(Status(StatusCode.ERROR, _describe_error(step.error)))
    span.end(end_time=max(_ns(step.started_at), _ns(step.finished_at)))


def _describe_step(step: StepRecord) -> tuple[str, SpanKind, Attributes]:
    """Return the span name, kind and attributes of a journal entry."""
    attributes: Attributes = {
        "signoff.step.position": step.position, "signoff.step.kind": step.kind.value,
        "signoff.step.name": step.name, "signoff.step.attempts": step.attempts}
    if step.error is not None:
        attributes["error.type"] = step.error.type
    if step.kind == StepKind.STEP and step.name == "model":
        name, model = _model_call(step)
        return name, SpanKind.CLIENT, attributes | model
    if step.kind == StepKind.STEP and step.name.startswith("tool:"):
        tool = step.name.removeprefix("tool:")
        return f"execute_tool {tool}", SpanKind.INTERNAL, attributes | {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    return _plain_name(step), SpanKind.INTERNAL, attributes


def _model_call(step: StepRecord) -> tuple[str, Attributes]:
    """Return the span name and GenAI attributes of a model step."""
    usage, model = model_call_of(step)
    attributes: Attributes = {"gen_ai.operation.name": "chat"}
    if model:
        attributes |= {"gen_ai.request.model": model, "gen_ai.response.model": model}
    if step.error is None:
        attributes |= {"gen_ai.usage.input_tokens": usage.input_tokens,
                       "gen_ai.usage.output_tokens": usage.output_tokens}
    stop = step.output.get("stop_reason") if isinstance(step.output, dict) else None
    if stop:
        attributes["gen_ai.response.finish_reasons"] = (str(stop),)
    return (f"chat {model}" if model else "chat"), attributes


def _plain_name(step: StepRecord) -> str:
    """Name a step by its name; other entries by kind and name (``wait approval:…``)."""
    if step.kind == StepKind.STEP or step.name == step.kind.value:
        return step.name
    return f"{step.kind.value} {step.name}"


def _attempts_by_position(attempts: Sequence[AttemptRecord]) -> dict[int, list[_Event]]:
    """Return each position's failed attempts as ``exception`` events."""
    events: dict[int, list[_Event]] = {}
    for attempt in attempts:
        events.setdefault(attempt.position, []).append(_Event("exception", attempt.at, {
            "exception.type": attempt.error.type, "exception.message": attempt.error.message,
            "signoff.attempt": attempt.attempt}))
    return events


def _approval_events(step: StepRecord, approvals: Mapping[str, Approval]) -> list[_Event]:
    """Return the approval request or decision a journal entry records, if any."""
    output = step.output if isinstance(step.output, dict) else {}
    if step.kind == StepKind.STEP and step.name.startswith("approval.request:"):
        approval = approvals.get(str(output.get("approval_id")))
        if approval is not None:
            return [_requested(approval)]
        return [_requested_as_recorded(step, output)] if "approval_id" in output else []
    data = output.get("data")
    if step.kind == StepKind.WAIT and isinstance(data, dict) and "approval_id" in data:
        approval = approvals.get(str(data["approval_id"]))
        return [_decided(approval) if approval else _decided_as_received(step, data)]
    return []


def _requested(approval: Approval) -> _Event:
    return _Event("approval.requested", approval.requested_at, _present({
        "signoff.approval.id": approval.id, "signoff.approval.tool": approval.tool,
        "signoff.approval.kind": approval.kind.value,
        "signoff.approval.requested_by": approval.requester.label,
        "signoff.approval.args_hash": approval.args_hash,
        "signoff.approval.deadline": approval.deadline.isoformat()}))


def _requested_as_recorded(step: StepRecord, output: dict[str, Any]) -> _Event:
    """The request as the journal recorded it, when its approval is no longer stored."""
    return _Event("approval.requested", step.finished_at, _present({
        "signoff.approval.id": str(output["approval_id"]),
        "signoff.approval.tool": step.name.removeprefix("approval.request:"),
        "signoff.approval.deadline": output.get("deadline")}))


def _decided(approval: Approval) -> _Event:
    by = approval.decided_by
    return _Event("approval.decided", approval.decided_at or approval.requested_at, _present({
        "signoff.approval.id": approval.id, "signoff.approval.tool": approval.tool,
        "signoff.approval.decision": approval.status.value,
        "signoff.approval.decided_by": None if by is None else by.label,
        "signoff.approval.decided_by.id": None if by is None else by.user_id,
        "signoff.approval.args_hash": approval.decided_args_hash or approval.args_hash,
        "signoff.approval.reason": approval.reason}))


def _decided_as_received(step: StepRecord, data: dict[str, Any]) -> _Event:
    """The decision as the journal recorded it, when its approval is no longer stored."""
    return _Event("approval.decided", step.started_at, _present({
        "signoff.approval.id": str(data["approval_id"]),
        "signoff.approval.decision": data.get("status"),
        "signoff.approval.args_hash": data.get("args_hash"),
        "signoff.approval.reason": data.get("reason")}))


def _present(values: Mapping[str, AttributeValue | None]) -> Attributes:
    """Drop the attributes that have no value."""
    return {key: value for key, value in values.items() if value is not None}


def _describe_error(error: ErrorInfo | None) -> str:
    return "failed" if error is None else f"{error.type}: {error.message}"


def _ns(moment: datetime) -> int:
    """Return nanoseconds since the epoch, exactly (a naive time is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000
