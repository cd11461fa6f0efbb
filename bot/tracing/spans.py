"""A run's journal as OpenTelemetry spans: one span for the run, one child span per entry.

Model calls follow the GenAI semantic conventions (``chat <model>``, token usage, finish
reasons) and tool calls are ``execute_tool <tool>``; span events come from ``events``. Ids
come from the run id and the journal position, so a run always gets the same. Each span is
made on its own from the pieces it needs, so a whole journal exported afterwards and spans
made one by one as the entries are committed are the same spans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from agent_runtime import (
    Approval,
    AttemptRecord,
    ErrorInfo,
    Run,
    RunId,
    RunStatus,
    StepKind,
    StepRecord,
)
from agent_runtime.budget_control import model_call_of
from agent_runtime.step_names import MODEL, TOOL, tool_of
from bot.tracing.events import Attributes, approval_events, attempt_events
from bot.tracing.ids import JournalIds, span_id_for, trace_id_for

SERVICE_NAME = "signoff"
SCOPE = "signoff.journal"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunJournal:
    """Everything a run's trace is made of, as the store keeps it."""

    run: Run
    steps: Sequence[StepRecord]
    attempts: Sequence[AttemptRecord] = ()
    approvals: Sequence[Approval] = ()


class JournalSpans:
    """Makes runs' and journal entries' spans, each ended at once and handed to ``processor``."""

    def __init__(self, processor: SpanProcessor) -> None:
        self._ids = JournalIds()
        self._provider = TracerProvider(
            sampler=ALWAYS_ON, resource=_resource(), shutdown_on_exit=False, id_generator=self._ids
        )
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer(SCOPE)

    def run_span(self, run: Run, steps: Sequence[StepRecord] = ()) -> None:
        """Make the run's span; a run not finished ends at the last of its ``steps``."""
        self._ids.expect(run.id, None)
        span = self._tracer.start_span(
            f"run {run.workflow}",
            attributes=_run_attributes(run),
            links=_fork_links(run),
            start_time=_ns(run.created_at),
        )
        if run.status == RunStatus.FAILED:
            span.set_status(Status(StatusCode.ERROR, _describe_error(run.error)))
        span.end(end_time=max(_ns(run.created_at), _ns(_run_end(run, steps))))

    def step_span(
        self,
        run_id: RunId,
        step: StepRecord,
        *,
        attempts: Sequence[AttemptRecord] = (),
        approvals: Mapping[str, Approval] | None = None,
    ) -> None:
        """Make the span of one journal entry, a child of its run's span.

        ``attempts`` are failed attempts of the run (those of other positions are ignored);
        ``approvals`` the stored approvals by id (the entry's own is enough).
        """
        name, kind, attributes = _describe_step(step)
        self._ids.expect(run_id, step.position)
        span = self._tracer.start_span(
            name,
            context=_run_context(run_id),
            kind=kind,
            attributes=attributes,
            start_time=_ns(step.started_at),
        )
        for event in (
            *attempt_events(attempts, step.position),
            *approval_events(step, approvals or {}),
        ):
            span.add_event(event.name, event.attributes, timestamp=_ns(event.at))
        if step.error is not None:
            span.set_status(Status(StatusCode.ERROR, _describe_error(step.error)))
        span.end(end_time=max(_ns(step.started_at), _ns(step.finished_at)))

    def shutdown(self) -> None:
        """Flush the processor and shut it down."""
        self._provider.shutdown()


def run_spans(journal: RunJournal) -> tuple[ReadableSpan, ...]:
    """Return the run's spans: the run span first, then one per journal entry in order."""
    memory = InMemorySpanExporter()
    spans = JournalSpans(SimpleSpanProcessor(memory))
    approvals: dict[str, Approval] = {approval.id: approval for approval in journal.approvals}
    spans.run_span(journal.run, journal.steps)
    for step in journal.steps:
        spans.step_span(journal.run.id, step, attempts=journal.attempts, approvals=approvals)
    finished = memory.get_finished_spans()
    spans.shutdown()
    return finished


def export_run(journal: RunJournal, exporter: SpanExporter) -> SpanExportResult:
    """Hand the run's spans to ``exporter`` as one batch and return its result."""
    return exporter.export(run_spans(journal))


def _resource() -> Resource:
    """``service.name`` signoff, plus what ``OTEL_RESOURCE_ATTRIBUTES`` adds (no random ids)."""
    return OTELResourceDetector().detect().merge(Resource({"service.name": SERVICE_NAME}))


def _run_context(run_id: RunId) -> Context:
    """The context of a run's span, for making its children without the span at hand."""
    parent = SpanContext(
        trace_id_for(run_id), span_id_for(run_id), is_remote=False, trace_flags=_SAMPLED
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))


def _run_attributes(run: Run) -> Attributes:
    attributes: Attributes = {
        "signoff.run.id": run.id,
        "signoff.run.workflow": run.workflow,
        "signoff.run.status": run.status.value,
    }
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
    origin = SpanContext(
        trace_id_for(run.forked_from),
        span_id_for(run.forked_from),
        is_remote=True,
        trace_flags=_SAMPLED,
    )
    return [Link(origin, {"signoff.link": "forked_from"})]


def _run_end(run: Run, steps: Sequence[StepRecord]) -> datetime:
    """A finished run ends when it was last updated; any other run at its last entry."""
    if run.status.finished or not steps:
        return run.updated_at
    return steps[-1].finished_at


def _describe_step(step: StepRecord) -> tuple[str, SpanKind, Attributes]:
    """Return the span name, kind and attributes of a journal entry."""
    attributes: Attributes = {
        "signoff.step.position": step.position,
        "signoff.step.kind": step.kind.value,
        "signoff.step.name": step.name,
        "signoff.step.attempts": step.attempts,
    }
    if step.error is not None:
        attributes["error.type"] = step.error.type
    if step.kind == StepKind.STEP and step.name == MODEL:
        name, model = _model_call(step)
        return name, SpanKind.CLIENT, attributes | model
    tool = tool_of(TOOL, step.name)
    if step.kind == StepKind.STEP and tool is not None:
        return (
            f"execute_tool {tool}",
            SpanKind.INTERNAL,
            attributes | {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool},
        )
    return _plain_name(step), SpanKind.INTERNAL, attributes


def _model_call(step: StepRecord) -> tuple[str, Attributes]:
    """Return the span name and GenAI attributes of a model step."""
    usage, model = model_call_of(step)
    output = step.output if isinstance(step.output, dict) else {}
    asked = str(output.get("requested_model") or model)  # older entries name only one
    attributes: Attributes = {"gen_ai.operation.name": "chat"}
    if asked:
        attributes["gen_ai.request.model"] = asked
    if model:
        attributes["gen_ai.response.model"] = model
    if step.error is None:
        attributes |= {
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
        }
    stop = output.get("stop_reason")
    if stop:
        attributes["gen_ai.response.finish_reasons"] = (str(stop),)
    return (f"chat {asked}" if asked else "chat"), attributes


def _plain_name(step: StepRecord) -> str:
    """Name a step by its name; other entries by kind and name (``wait approval:…``)."""
    if step.kind == StepKind.STEP or step.name == step.kind.value:
        return step.name
    return f"{step.kind.value} {step.name}"


def _describe_error(error: ErrorInfo | None) -> str:
    return "failed" if error is None else f"{error.type}: {error.message}"


def _ns(moment: datetime) -> int:
    """Return nanoseconds since the epoch, exactly (a naive time is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000
