"""``SIGNOFF_OTLP_ENDPOINT``: workers stream each committed entry, and each run's end, as spans.

Real ``signoff worker`` processes send to an in-process OTLP/HTTP collector. The tracing
agent's run (a retried lookup, a refund that waits for Dana's approval) is streamed by two
``--until-idle`` workers, one before the decision and one after, and what arrived is
compared with ``signoff trace RUN --file`` for the same run. A waiting workflow shows the
spans leave while the worker still runs, and a collector that is down changes nothing for
the run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from statistics import median
from typing import Any

import pytest

from agent_runtime import Actor, Agent, AgentInput, Decision, RunId, RunStatus, StepRecord
from agent_runtime.models import ModelRequest, ModelResponse, ScriptedModel, ToolCall
from agent_runtime.models.scripted import text_reply, tool_reply
from bot.app.settings import Settings
from bot.app.wiring import Services, build_services
from bot.cli.main import main
from bot.tracing import span_id_for
from bot.tracing.stream import EXPORT_TIMEOUT, FLUSH_GRACE
from tests.integration import (
    TEST_WORKFLOWS,
    WorkerProcess,
    cli_ok,
    run_cli,
    signoff_env,
    wait_until,
)
from tests.integration.otlp_collector import OtlpCollector
from tests.integration.test_trace_export import (
    APPROVER,
    MODEL,
    REQUESTER,
    SpanView,
    _closed_port,
    _from_json,
    _from_proto,
    tracing_agent,
)

ENDPOINT = "SIGNOFF_OTLP_ENDPOINT"
WAIT_S = 60.0
"""How long a worker process may take to start and send spans on a loaded machine."""
HELD_STEP = timedelta(seconds=1)
"""Less than a step would take that waited on an export to a closed port (the exporter retries
for seconds before it gives up); far more than a step takes on a loaded machine."""
STREAMING_AGENT = "tests.integration.test_trace_stream:streaming_agent"


def streaming_agent() -> Agent:
    """The tracing agent, its model answering from the conversation rather than by count, so
    that a second worker process carries on the run where the first left it."""
    return dataclasses.replace(tracing_agent(), model=ScriptedModel(_answer, name=MODEL))


def _answer(request: ModelRequest) -> ModelResponse:
    """Ask to look order 7 up and to refund it; once the tools have answered, say it is done."""
    if any(message.role == "tool" for message in request.messages):
        return text_reply("refunded")
    return tool_reply(
        ToolCall(id="c1", name="lookup", arguments={"order": 7}),
        ToolCall(id="c2", name="refund", arguments={"order": 7}),
    )


@dataclass(frozen=True)
class Streamed:
    """One agent run streamed by two workers, and what the collector had after each."""

    database_url: str
    run_id: RunId
    journal_before_decision: list[StepRecord]
    spans_before_decision: list[SpanView]
    journal: list[StepRecord]
    spans: list[SpanView]
    status: RunStatus


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Streamed]:
    """The tracing agent's run: a worker until it waits for Dana, her approval, a worker to end."""
    url = f"sqlite:///{tmp_path_factory.mktemp('stream') / 'signoff.db'}"
    services = build_services(Settings(database_url=url, agent=STREAMING_AGENT))
    with OtlpCollector() as collector:
        env = signoff_env(url, extra={"SIGNOFF_AGENT": STREAMING_AGENT, ENDPOINT: collector.url})
        try:
            data = AgentInput(task="refund order 7", requester=Actor(user_id=REQUESTER))
            run_id = services.runtime.start("agent:tracer", data.to_json()).id
            cli_ok(env, "worker", "--until-idle", "--concurrency", "1")
            before = services.runtime.journal(run_id), _spans_of(collector, run_id)
            _approve_all(services, run_id)
            cli_ok(env, "worker", "--until-idle", "--concurrency", "1")
            yield Streamed(
                url,
                run_id,
                *before,
                services.runtime.journal(run_id),
                _spans_of(collector, run_id),
                services.runtime.get(run_id).status,
            )
        finally:
            services.store.engine.dispose()


def test_entries_committed_before_the_decision_arrived_without_the_run_span(
    streamed: Streamed,
) -> None:
    """The first worker sent each entry it committed, children of the run span, in its trace."""
    spans = streamed.spans_before_decision
    assert streamed.journal_before_decision, "the run waits for the approval"
    assert sorted(_positions(spans)) == [s.position for s in streamed.journal_before_decision]
    _assert_children_of_the_run(spans, streamed.run_id)
    assert not [s for s in spans if s.parent_id == ""], "the run has not ended yet"


def test_every_entry_arrived_once_and_the_run_span_once_the_run_ended(
    streamed: Streamed,
) -> None:
    """Every entry is one span and the run span came when the run completed, each exactly once."""
    assert streamed.status == RunStatus.COMPLETED
    entries = [s for s in streamed.spans if s.parent_id]
    assert sorted(_positions(entries)) == [s.position for s in streamed.journal]
    _assert_children_of_the_run(entries, streamed.run_id)
    (root,) = [s for s in streamed.spans if not s.parent_id]
    assert (root.name, root.span_id, root.trace_id) == (
        "run agent:tracer",
        f"{span_id_for(streamed.run_id):016x}",
        streamed.run_id,
    )
    assert root.attributes["signoff.run.status"] == "completed"


def test_streamed_spans_are_the_spans_signoff_trace_exports(
    streamed: Streamed,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ids, names, times, attributes, events and status equal ``signoff trace RUN --file``."""
    out = tmp_path / "trace.jsonl"
    monkeypatch.setenv("SIGNOFF_DATABASE_URL", streamed.database_url)
    assert main(["trace", streamed.run_id, "--file", str(out)]) == 0
    exported = _from_json(json.loads(out.read_text(encoding="utf-8")))
    assert _keyed(streamed.spans) == _keyed(exported)
    lookup = _keyed(exported)[str(_position_of(streamed.journal, "tool:lookup"))]
    assert [name for name, _, _ in lookup.events] == ["exception"], "the retry is an event"


def test_spans_leave_while_the_worker_runs(tmp_path: Path) -> None:
    """With the worker still running, entries arrive as committed and the run span at the end."""
    url = f"sqlite:///{tmp_path / 'signoff.db'}"
    services = build_services(Settings(database_url=url, workflow_modules=(TEST_WORKFLOWS,)))
    with OtlpCollector() as collector:
        env = signoff_env(url, extra={ENDPOINT: collector.url, "OTEL_BSP_SCHEDULE_DELAY": "50"})
        try:
            run_id = services.runtime.start("test.waiter", {"path": str(tmp_path / "out")}).id
            with WorkerProcess(env, tmp_path / "worker.log") as worker:
                waiting = wait_until(
                    lambda: _received(collector, run_id, 2),
                    timeout=WAIT_S,
                    what="the spans of step 1 and the wait",
                    alive=worker,
                )
                services.runtime.signal(run_id, "go", "now")
                ended = wait_until(
                    lambda: _received(collector, run_id, 5),
                    timeout=WAIT_S,
                    what="the remaining spans and the run's",
                    alive=worker,
                )
                assert worker.stop() == 0, worker.output()
        finally:
            services.store.engine.dispose()
    assert [s.name for s in waiting] == ["step 1", "wait.deadline go"]
    assert [s.name for s in ended] == [
        "step 1",
        "wait.deadline go",
        "wait go",
        "step 2",
        "run test.waiter",
    ]
    _assert_children_of_the_run(ended[:-1], run_id)


def test_a_collector_that_is_down_changes_nothing_for_the_run(tmp_path: Path) -> None:
    """A dead collector never slows or fails a run, and is logged once without secrets."""
    url = f"sqlite:///{tmp_path / 'signoff.db'}"
    services = build_services(Settings(database_url=url, demo=True))
    endpoint = f"http://trace:s3cret@127.0.0.1:{_closed_port()}/v1/traces?token=t0ken"
    env = signoff_env(url, extra={ENDPOINT: endpoint, "SIGNOFF_LOG_FORMAT": "json"})
    try:
        run_id = services.runtime.start("demo.trivial", {"n": 20}).id
        done = run_cli(env, "worker", "--until-idle")
        run = services.runtime.get(run_id)
        journal = services.runtime.journal(run_id)
    finally:
        services.store.engine.dispose()
    assert (done.returncode, run.status) == (0, RunStatus.COMPLETED), done.stderr
    # Times the product records, not this test's clock: the machine may be loaded.
    gaps = [
        (later.finished_at - entry.finished_at).total_seconds()
        for entry, later in pairwise(journal)
    ]
    assert median(gaps) < HELD_STEP.total_seconds(), "the steps did not wait on the exporter"
    (closed,) = [r for r in _log_records(done.stderr) if r["message"] == "trace stream closed"]
    assert closed["seconds"] < (FLUSH_GRACE + EXPORT_TIMEOUT).total_seconds(), "a bounded flush"
    failures = [line for line in done.stderr.splitlines() if "trace export failed" in line]
    assert len(failures) == 1, done.stderr
    assert "cannot connect" in failures[0]
    assert "s3cret" not in done.stderr
    assert "t0ken" not in done.stderr
    assert "Traceback" not in done.stderr


# --- helpers ---------------------------------------------------------------------------------


def _approve_all(services: Services, run_id: RunId) -> None:
    approvals = services.approvals.store.list_approvals(run_id=run_id)
    assert approvals, "the refund asked for an approval"
    for approval in approvals:
        assert services.approvals.decide(approval.id, APPROVER, Decision.APPROVE).accepted


def _spans_of(collector: OtlpCollector, run_id: RunId) -> list[SpanView]:
    """Every span the collector received in the run's trace, in the order received."""
    return [_from_proto(s) for s in collector.spans() if s.trace_id.hex() == run_id]


def _received(collector: OtlpCollector, run_id: RunId, count: int) -> list[SpanView] | None:
    """The run's spans once there are ``count`` of them, by position (the run span last)."""
    spans = _spans_of(collector, run_id)
    if len(spans) < count:
        return None
    return sorted(
        spans, key=lambda s: (not s.parent_id, int(s.attributes.get("signoff.step.position", 0)))
    )


def _log_records(stderr: str) -> list[dict[str, Any]]:
    """The JSON log records a ``signoff`` process wrote (``SIGNOFF_LOG_FORMAT=json``)."""
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def _positions(spans: list[SpanView]) -> list[int]:
    return [int(s.attributes["signoff.step.position"]) for s in spans]


def _position_of(journal: list[StepRecord], name: str) -> int:
    (step,) = [s for s in journal if s.name == name]
    return step.position


def _keyed(spans: list[SpanView]) -> dict[str, SpanView]:
    """Key the run span as ``run`` and each entry's span by position; no key twice."""
    keyed = {str(s.attributes.get("signoff.step.position", "run")): s for s in spans}
    assert len(keyed) == len(spans), "one span per journal entry"
    return keyed


def _assert_children_of_the_run(spans: list[SpanView], run_id: RunId) -> None:
    root = f"{span_id_for(run_id):016x}"
    for span in spans:
        position = int(span.attributes["signoff.step.position"])
        assert (span.trace_id, span.parent_id) == (run_id, root)
        assert span.span_id == f"{span_id_for(run_id, position):016x}"
