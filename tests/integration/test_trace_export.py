"""``signoff trace``: a real agent run's journal exported as OpenTelemetry spans.

One agent run on a SQLite file — a model call proposes a lookup (whose first attempt
fails and is retried) and a refund that needs Dana's approval — is exported to an
in-process OTLP/HTTP collector, to a file and to stdout, and the spans are checked
against the journal they came from.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.trace import StatusCode

from agent_runtime import (
    Actor,
    Agent,
    AgentInput,
    ApprovalPolicy,
    AttemptRecord,
    Decision,
    ErrorInfo,
    RetryPolicy,
    Run,
    RunId,
    RunStatus,
    StepKind,
    StepRecord,
    Tools,
    WorkerOptions,
    new_run_id,
    tool,
)
from agent_runtime.models import ScriptedModel, ToolCall, Usage
from agent_runtime.models.scripted import text_reply, tool_reply
from bot.app.settings import Settings
from bot.app.wiring import Services, build_services
from bot.cli.main import main
from bot.tracing import RunJournal, run_spans, span_id_for, trace_id_for
from tests.integration import run_cli, signoff_env
from tests.integration.otlp_collector import OtlpCollector

TRACING_AGENT = "tests.integration.test_trace_export:tracing_agent"
MODEL = "trace-model-1"
ANSWERED_BY = "trace-model-1-2026-11-01"
"""The model id the responses name, as providers answer with a dated snapshot of it."""
APPROVER = Actor(user_id="U_DANA", name="Dana Approver")
REQUESTER = "U_REQ"
FIRST_USAGE = Usage(input_tokens=321, output_tokens=45)
SECOND_USAGE = Usage(input_tokens=400, output_tokens=12)


def tracing_agent() -> Agent:
    """An agent whose first turn looks an order up (failing once) and asks to refund it."""
    failures = iter([ConnectionError("ledger unreachable")])

    def lookup(order: int) -> dict[str, Any]:
        """Look an order up.

        Args:
            order: The order number.
        """
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return {"order": order, "total": 42}

    def refund(order: int) -> dict[str, Any]:
        """Refund an order.

        Args:
            order: The order number.
        """
        return {"refunded": order}

    script = [
        dataclasses.replace(
            tool_reply(
                ToolCall(id="c1", name="lookup", arguments={"order": 7}),
                ToolCall(id="c2", name="refund", arguments={"order": 7}),
            ),
            usage=FIRST_USAGE,
            model=ANSWERED_BY,
        ),
        dataclasses.replace(text_reply("refunded"), usage=SECOND_USAGE, model=ANSWERED_BY),
    ]
    retry = RetryPolicy(max_attempts=3, initial_interval=timedelta(milliseconds=1))
    approval = ApprovalPolicy(approvers=(APPROVER.user_id,))
    return Agent(
        name="tracer",
        model=ScriptedModel(script, name=MODEL),
        system_prompt="Refund orders.",
        tools=Tools(tool(retry=retry)(lookup), tool(side_effect=True, approval=approval)(refund)),
    )


@dataclass(frozen=True)
class Traced:
    """The finished run and its journal, as the store keeps them."""

    database_url: str
    run: Run
    journal: list[StepRecord]
    attempts: list[AttemptRecord]

    def step(self, name: str) -> StepRecord:
        """The one journal entry called ``name``."""
        (found,) = [s for s in self.journal if s.name == name]
        return found


@dataclass(frozen=True)
class SpanView:
    """A span reduced to what the tests compare, from protobuf or from OTLP JSON."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]]
    status: int


@dataclass(frozen=True)
class Done:
    """What an in-process ``signoff`` command returned and printed."""

    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    """One completed run of the tracing agent: model call, retried lookup, approved refund."""
    url = f"sqlite:///{tmp_path_factory.mktemp('trace') / 'signoff.db'}"
    services = build_services(Settings(database_url=url, agent=TRACING_AGENT))
    try:
        run_id = _finish_run(services)
        runtime = services.runtime
        yield Traced(url, runtime.get(run_id), runtime.journal(run_id), runtime.attempts(run_id))
    finally:
        services.store.engine.dispose()


def _finish_run(services: Services) -> RunId:
    data = AgentInput(task="refund order 7", requester=Actor(user_id=REQUESTER)).to_json()
    run_id = services.runtime.start("agent:tracer", data).id
    options = WorkerOptions(
        concurrency=1, lease_ttl=timedelta(seconds=5), poll_interval=timedelta(milliseconds=20)
    )
    services.runtime.worker(options).run(until_idle=True)
    for approval in services.approvals.store.list_approvals(run_id=run_id):
        assert services.approvals.decide(approval.id, APPROVER, Decision.APPROVE).accepted
    services.runtime.worker(options).run(until_idle=True)
    assert services.runtime.get(run_id).status == RunStatus.COMPLETED
    return run_id


@pytest.fixture(scope="module")
def collector() -> Iterator[OtlpCollector]:
    """An OTLP/HTTP collector for the module."""
    with OtlpCollector() as running:
        yield running


@pytest.fixture(scope="module")
def received(traced: Traced, collector: OtlpCollector) -> dict[str, SpanView]:
    """The spans the collector received from ``signoff trace RUN --otlp URL``, by name."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SIGNOFF_DATABASE_URL", traced.database_url)
        patch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
        assert main(["trace", traced.run.id, "--otlp", collector.url]) == 0
    return _by_name([_from_proto(s) for s in collector.spans()], traced)


@pytest.fixture
def signoff(
    traced: Traced, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Done]:
    """Run ``signoff ARGS`` in this process on the traced run's database."""
    monkeypatch.setenv("SIGNOFF_DATABASE_URL", traced.database_url)

    def invoke(*args: str) -> Done:
        code = main(list(args))
        out, err = capsys.readouterr()
        return Done(code, out, err)

    return invoke


def test_one_request_holds_a_run_span_and_one_child_span_per_journal_entry(
    traced: Traced, collector: OtlpCollector, received: dict[str, SpanView]
) -> None:
    """Every journal entry is one span whose parent is the run span, all in the run's trace."""
    assert collector.encodings == ["gzip"]
    root = received["run"]
    assert (root.name, root.parent_id) == ("run agent:tracer", "")
    assert root.attributes == {
        "signoff.run.id": traced.run.id,
        "signoff.run.workflow": "agent:tracer",
        "signoff.run.status": "completed",
    }
    assert len(received) == len(traced.journal) + 1
    assert {s.trace_id for s in received.values()} == {traced.run.id}
    assert root.span_id == f"{span_id_for(traced.run.id):016x}"
    for step in traced.journal:
        span = received[str(step.position)]
        assert span.parent_id == root.span_id
        assert span.span_id == f"{span_id_for(traced.run.id, step.position):016x}"
        assert {
            k: span.attributes[k]
            for k in (
                "signoff.step.position",
                "signoff.step.kind",
                "signoff.step.name",
                "signoff.step.attempts",
            )
        } == {
            "signoff.step.position": step.position,
            "signoff.step.kind": step.kind.value,
            "signoff.step.name": step.name,
            "signoff.step.attempts": step.attempts,
        }


def test_span_times_are_the_journal_times(traced: Traced, received: dict[str, SpanView]) -> None:
    """The run span spans created_at..updated_at; each step span its started_at..finished_at."""
    root = received["run"]
    assert (root.start, root.end) == (_ns(traced.run.created_at), _ns(traced.run.updated_at))
    for step in traced.journal:
        span = received[str(step.position)]
        assert (span.start, span.end) == (_ns(step.started_at), _ns(step.finished_at))


def test_model_spans_carry_the_genai_attributes_of_the_journal(
    traced: Traced, received: dict[str, SpanView]
) -> None:
    """Model spans name the model asked and the one that answered, with tokens and stop."""
    models = [s for s in traced.journal if s.name == "model"]
    assert len(models) == 2
    for step, usage in zip(models, (FIRST_USAGE, SECOND_USAGE), strict=True):
        span = received[str(step.position)]
        assert span.name == f"chat {MODEL}"
        assert (step.output["requested_model"], step.output["model"]) == (MODEL, ANSWERED_BY)
        assert step.output["usage"] == {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
        }
        assert {k: v for k, v in span.attributes.items() if k.startswith("gen_ai.")} == {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": MODEL,
            "gen_ai.response.model": ANSWERED_BY,
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.response.finish_reasons": (step.output["stop_reason"],),
        }
    tool_span = received[str(traced.step("tool:refund").position)]
    assert tool_span.name == "execute_tool refund"
    assert tool_span.attributes["gen_ai.tool.name"] == "refund"


def test_the_approval_request_and_who_decided_are_span_events(
    traced: Traced, received: dict[str, SpanView]
) -> None:
    """The request step carries ``approval.requested``; the wait entry ``approval.decided``."""
    (wait,) = [s for s in traced.journal if s.kind == StepKind.WAIT]
    decision = wait.output["data"]
    ((name, at, attributes),) = received[str(wait.position)].events
    assert (name, at) == ("approval.decided", _ns(datetime.fromisoformat(decision["decided_at"])))
    assert attributes == {
        "signoff.approval.id": decision["approval_id"],
        "signoff.approval.tool": "refund",
        "signoff.approval.decision": "approved",
        "signoff.approval.decided_by": APPROVER.name,
        "signoff.approval.decided_by.id": APPROVER.user_id,
        "signoff.approval.args_hash": decision["args_hash"],
    }
    request = traced.step("approval.request:refund")
    ((name, _, attributes),) = received[str(request.position)].events
    assert name == "approval.requested"
    assert attributes["signoff.approval.id"] == decision["approval_id"]
    assert attributes["signoff.approval.requested_by"] == REQUESTER


def test_a_retried_step_carries_its_failed_attempt(
    traced: Traced, received: dict[str, SpanView]
) -> None:
    """The lookup that failed once has attempts=2 and an ``exception`` event at the failure."""
    lookup = traced.step("tool:lookup")
    (failed,) = traced.attempts
    assert (lookup.attempts, failed.position) == (2, lookup.position)
    span = received[str(lookup.position)]
    assert span.events == [
        (
            "exception",
            _ns(failed.at),
            {
                "exception.type": "ConnectionError",
                "exception.message": "ledger unreachable",
                "signoff.attempt": 1,
            },
        )
    ]
    assert span.status == StatusCode.UNSET.value


def test_file_output_parses_back_to_the_same_spans_every_time(
    traced: Traced, received: dict[str, SpanView], tmp_path: Path, signoff: Callable[..., Done]
) -> None:
    """Two ``--file`` exports append two identical OTLP JSON lines holding those spans."""
    out = tmp_path / "trace.jsonl"
    for _ in range(2):
        assert signoff("trace", traced.run.id, "--file", str(out)).code == 0
    first, second = out.read_text(encoding="utf-8").splitlines()
    assert first == second, "the same run exports the same document"
    assert _by_name(_from_json(json.loads(first)), traced) == received


def test_stdout_is_the_otlp_json_of_the_same_spans(
    traced: Traced, received: dict[str, SpanView], signoff: Callable[..., Done]
) -> None:
    """With no target the document goes to stdout, resource ``service.name`` signoff."""
    done = signoff("trace", traced.run.id)
    assert (done.code, done.err) == (0, "")
    (line,) = done.out.splitlines()
    document = json.loads(line)
    (resource,) = document["resourceSpans"]
    assert {"key": "service.name", "value": {"stringValue": "signoff"}} in resource["resource"][
        "attributes"
    ]
    assert _by_name(_from_json(document), traced) == received


def test_a_url_without_a_path_is_sent_to_the_traces_endpoint(
    traced: Traced, signoff: Callable[..., Done]
) -> None:
    """``--otlp http://host:port`` posts to ``/v1/traces`` and says how many spans it sent."""
    with OtlpCollector() as other:
        base = other.url.removesuffix("/v1/traces")
        done = signoff("trace", traced.run.id, "--otlp", base)
        assert len(other.spans()) == len(traced.journal) + 1
    assert done.out == (
        f"sent {len(traced.journal) + 1} spans of run {traced.run.id} to {base}/v1/traces\n"
    )


def test_an_unreachable_collector_is_one_error_line_and_status_1(traced: Traced) -> None:
    """``--otlp`` to a closed port exits 1 with one ``signoff: error:`` line, no traceback."""
    url = f"http://127.0.0.1:{_closed_port()}/v1/traces"
    done = run_cli(
        signoff_env(traced.database_url), "trace", traced.run.id, "--otlp", url, "--timeout", "0.5"
    )
    assert done.returncode == 1
    assert done.stderr == f"signoff: error: could not send the trace to {url}: cannot connect\n"


def test_an_unknown_run_is_a_usage_error(signoff: Callable[..., Done]) -> None:
    """An unknown run exits 2 with the CLI's usual one-line error."""
    done = signoff("trace", "0123456789abcdef0123456789abcdef")
    assert done.code == 2
    assert done.err == "signoff: error: no run with id 0123456789abcdef0123456789abcdef\n"


def test_otlp_and_file_are_mutually_exclusive(
    traced: Traced, signoff: Callable[..., Done], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--otlp`` with ``--file`` is refused with exit status 2."""
    with pytest.raises(SystemExit) as exit_:
        signoff("trace", traced.run.id, "--otlp", "http://127.0.0.1:4318", "--file", "t.json")
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_failed_run_and_its_failed_step_have_error_status() -> None:
    """A failed run and step get status ERROR with the message; every attempt is an event."""
    start = datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    boom = ErrorInfo(type="ValueError", message="card declined")
    run = Run(
        id=new_run_id(),
        workflow="demo.charge",
        status=RunStatus.FAILED,
        input=None,
        error=boom,
        created_at=start,
        updated_at=start + timedelta(seconds=3),
    )
    step = StepRecord(
        position=0,
        kind=StepKind.STEP,
        name="charge",
        input_hash="h",
        error=boom,
        attempts=2,
        started_at=start + timedelta(seconds=1),
        finished_at=start + timedelta(seconds=2),
    )
    attempts = [
        AttemptRecord(
            position=0, attempt=n, error=boom, at=start + timedelta(seconds=1, milliseconds=n)
        )
        for n in (1, 2)
    ]
    root, span = run_spans(RunJournal(run=run, steps=[step], attempts=attempts))
    for made in (root, span):
        assert (made.status.status_code, made.status.description) == (
            StatusCode.ERROR,
            "ValueError: card declined",
        )
    assert [e.attributes["signoff.attempt"] for e in span.events if e.attributes] == [1, 2]
    assert root.context is not None
    assert root.context.trace_id == trace_id_for(run.id)


def test_an_unfinished_run_ends_at_its_last_entry() -> None:
    """A waiting run's span ends at its last journal entry, not at its last update."""
    start = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    run = Run(
        id=new_run_id(),
        workflow="demo.wait",
        status=RunStatus.WAITING,
        input=None,
        wait_key="go",
        created_at=start,
        updated_at=start + timedelta(hours=1),
    )
    step = StepRecord(
        position=0,
        kind=StepKind.NOW,
        name="now",
        input_hash="h",
        started_at=start + timedelta(seconds=1),
        finished_at=start + timedelta(seconds=2),
    )
    root, _ = run_spans(RunJournal(run=run, steps=[step]))
    assert root.end_time == _ns(step.finished_at)
    assert root.attributes is not None
    assert root.attributes["signoff.run.wait_key"] == "go"


def test_approval_events_come_from_the_journal_when_no_approval_is_stored() -> None:
    """Without stored approvals, the request and decision events are read from the journal."""
    at = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    run = Run(
        id=new_run_id(),
        workflow="agent:x",
        status=RunStatus.RUNNING,
        input=None,
        created_at=at,
        updated_at=at,
    )
    request = StepRecord(
        position=0,
        kind=StepKind.STEP,
        name="approval.request:refund",
        input_hash="h",
        output={"approval_id": "a1", "deadline": "soon"},
        started_at=at,
        finished_at=at + timedelta(seconds=1),
    )
    wait = StepRecord(
        position=1,
        kind=StepKind.WAIT,
        name="approval:a1",
        input_hash="h",
        output={
            "data": {
                "approval_id": "a1",
                "status": "rejected",
                "args_hash": None,
                "reason": "too much",
            }
        },
        started_at=at + timedelta(seconds=9),
        finished_at=at + timedelta(seconds=9),
    )
    _, asked, answered = run_spans(RunJournal(run=run, steps=[request, wait]))
    assert [(e.name, e.timestamp, dict(e.attributes or {})) for e in asked.events] == [
        (
            "approval.requested",
            _ns(request.finished_at),
            {
                "signoff.approval.id": "a1",
                "signoff.approval.tool": "refund",
                "signoff.approval.deadline": "soon",
            },
        )
    ]
    assert [(e.name, e.timestamp, dict(e.attributes or {})) for e in answered.events] == [
        (
            "approval.decided",
            _ns(wait.started_at),
            {
                "signoff.approval.id": "a1",
                "signoff.approval.decision": "rejected",
                "signoff.approval.reason": "too much",
            },
        )
    ]


# --- reading spans back -----------------------------------------------------------------------


def _by_name(spans: list[SpanView], traced: Traced) -> dict[str, SpanView]:
    """Key the run span as ``run`` and each step span by its journal position."""
    keyed = {str(s.attributes.get("signoff.step.position", "run")): s for s in spans}
    assert len(keyed) == len(spans), "one span per journal entry"
    assert keyed["run"].attributes["signoff.run.id"] == traced.run.id
    return keyed


def _from_proto(span: Span) -> SpanView:
    return SpanView(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=span.parent_span_id.hex(),
        name=span.name,
        start=span.start_time_unix_nano,
        end=span.end_time_unix_nano,
        attributes=_proto_attributes(span.attributes),
        events=[(e.name, e.time_unix_nano, _proto_attributes(e.attributes)) for e in span.events],
        status=span.status.code,
    )


def _proto_attributes(pairs: Any) -> dict[str, Any]:
    items: list[KeyValue] = list(pairs)
    return {item.key: _proto_value(item.value) for item in items}


def _proto_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_proto_value(v) for v in value.array_value.values)
    return getattr(value, str(kind))


def _from_json(document: dict[str, Any]) -> list[SpanView]:
    return [
        SpanView(
            trace_id=span["traceId"],
            span_id=span["spanId"],
            parent_id=span.get("parentSpanId", ""),
            name=span["name"],
            start=int(span["startTimeUnixNano"]),
            end=int(span["endTimeUnixNano"]),
            attributes=_json_attributes(span.get("attributes", [])),
            events=[
                (e["name"], int(e["timeUnixNano"]), _json_attributes(e.get("attributes", [])))
                for e in span.get("events", [])
            ],
            status=span.get("status", {}).get("code", 0),
        )
        for resource in document["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def _json_attributes(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    return {pair["key"]: _json_value(pair["value"]) for pair in pairs}


def _json_value(value: dict[str, Any]) -> Any:
    ((kind, raw),) = value.items()
    if kind == "arrayValue":
        return tuple(_json_value(v) for v in raw.get("values", []))
    return int(raw) if kind == "intValue" else raw


def _ns(moment: datetime) -> int:
    return (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
