"""JSON log lines name the trace they belong to: the run's, as its spans are exported.

A refund run is started from Slack and worked, then an outsider clicks its card; every JSON
line logged meanwhile about the run carries the trace id and span id that ``signoff trace``
exports for the run and for the journal entry the line is about.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from bot.cli.trace import load_journal
from bot.ops.logs import formatter
from bot.slack.blocks import APPROVE
from bot.tracing import run_spans
from tests.integration.slack_harness import (
    OUTSIDER,
    BotInstance,
    SlackWorld,
    eventually,
)
from tests.integration.slack_readers import approvals_of
from tests.integration.slack_steps import (
    acked,
    start_refund_run,
)


class Lines(logging.Handler):
    """Keeps every record as the JSON line ``SIGNOFF_LOG_FORMAT=json`` would write."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(formatter("json"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def about(self, run_id: str) -> list[dict[str, object]]:
        """The lines logged about ``run_id``, parsed."""
        parsed = [json.loads(line) for line in list(self.lines)]
        return [entry for entry in parsed if entry.get("run_id") == run_id]


@pytest.fixture
def lines() -> Iterator[Lines]:
    """Every record of the test, at DEBUG, as JSON lines."""
    root = logging.getLogger()
    handler, level = Lines(), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def test_lines_about_a_run_carry_its_exported_trace_and_span_ids(
    world: SlackWorld, bot: BotInstance, lines: Lines
) -> None:
    """Lines of the worker's steps carry the trace id and the span id of the entry's exported
    span; the line of a refused click carries the run's trace id and the run span's id."""
    run_id = start_refund_run(world, bot)
    refund = approvals_of(bot, run_id)["issue_refund"]
    acked(bot.click(OUTSIDER, APPROVE, world.card(refund.id)))
    eventually(
        lambda: any(e["message"] == "decision refused" for e in lines.about(run_id)),
        what="the refused click logged",
    )

    run_span, *entry_spans = run_spans(load_journal(bot.services, run_id))
    span_ids = [f"{span.context.span_id:016x}" for span in entry_spans]
    about = lines.about(run_id)
    assert {entry["trace_id"] for entry in about} == {f"{run_span.context.trace_id:032x}"}
    committed = [e for e in about if e["message"] == "step committed"]
    assert [e["span_id"] for e in committed] == [span_ids[int(str(e["step"]))] for e in committed]
    assert len(committed) >= 2
    refused = next(e for e in about if e["message"] == "decision refused")
    assert refused["span_id"] == f"{run_span.context.span_id:016x}"
