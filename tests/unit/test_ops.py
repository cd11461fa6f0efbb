"""Unit tests of the operator's side: log lines, loop stalls, health reports, settings."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.trace import TracerProvider

from agent_runtime import RunId, RunStatus, StepKind
from agent_runtime.exceptions import StoreUnavailable
from agent_runtime.observers import combined
from agent_runtime.records import Run, StepRecord
from bot.app.settings import Settings, SettingsError
from bot.ops.health import Health
from bot.ops.logs import MASK, formatter
from bot.ops.loops import Loops
from bot.tracing import span_id_for

SECRET = 'xoxb-se"cret\\value'


def record(message: str, **extra: object) -> logging.LogRecord:
    """Return a record as ``logger.error(message, extra=extra)`` makes it, with a traceback."""
    try:
        raise ValueError(f"boom {SECRET}")
    except ValueError:
        exc_info = sys.exc_info()
    made = logging.LogRecord("bot.x", logging.ERROR, __file__, 1, message, None, exc_info)
    made.__dict__.update(extra)
    return made


def test_json_lines_carry_the_fields_passed_in_extra_and_the_traceback() -> None:
    """A JSON line has timestamp, level, logger, message, each ``extra`` field and the trace."""
    line = formatter("json").format(record("sent", run_id="r1", action="dispatch", step=3))
    entry = json.loads(line)
    assert "\n" not in line
    assert {k: entry[k] for k in ("level", "logger", "message", "run_id", "action", "step")} == {
        "level": "ERROR",
        "logger": "bot.x",
        "message": "sent",
        "run_id": "r1",
        "action": "dispatch",
        "step": 3,
    }
    assert entry["timestamp"].endswith("+00:00")
    assert "ValueError: boom" in entry["exception"]


def test_json_lines_name_the_current_span_else_the_run_trace_else_none() -> None:
    """Inside a current OpenTelemetry span a JSON line carries that span's trace and span ids;
    outside one, a line about a run carries the run's trace; any other line carries neither."""
    tracer = TracerProvider().get_tracer("test")
    run_id = RunId("0123456789abcdef0123456789abcdef")
    with tracer.start_as_current_span("click") as span:
        inside = json.loads(formatter("json").format(record("x", run_id=run_id)))
    about_run = json.loads(formatter("json").format(record("x", run_id=run_id, step=2)))
    plain = json.loads(formatter("json").format(record("x", run_id="r1")))

    ids = span.get_span_context()
    assert (inside["trace_id"], inside["span_id"]) == (
        f"{ids.trace_id:032x}",
        f"{ids.span_id:016x}",
    )
    assert (about_run["trace_id"], about_run["span_id"]) == (
        run_id,
        f"{span_id_for(run_id, 2):016x}",
    )
    assert "trace_id" not in plain
    assert "span_id" not in plain


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_secrets_are_masked_in_messages_fields_and_tracebacks(log_format: str) -> None:
    """Every form of a secret (raw or JSON-escaped) is masked, whatever the format."""
    line = formatter(log_format, [SECRET]).format(
        record(f"token {SECRET}", action=SECRET, detail={"key": SECRET})
    )
    assert SECRET not in line
    assert json.dumps(SECRET)[1:-1] not in line
    assert MASK in line
    if log_format == "json":
        assert json.loads(line)["action"] == MASK


@pytest.mark.parametrize("token", ["xoxb-1-2-abc", "xoxe.xoxb-1-T0BETA-7", "xoxe-1-T0BETA-7"])
def test_slack_tokens_are_masked_even_when_not_configured(token: str) -> None:
    """A workspace's token read from the database (so unknown to the settings) is masked."""
    line = formatter("json").format(record(f"refreshed {token}", action="install"))
    assert token not in line
    assert MASK in json.loads(line)["message"]


def test_a_loop_counts_as_stalled_only_past_its_interval_plus_the_grace() -> None:
    """A loop that went round recently is fine; one silent for too long is reported."""
    loops = Loops()
    loops.add("fresh", timedelta(seconds=1))
    loops.watch("stuck", timedelta(seconds=1), lambda: 0.0)
    stalled = loops.stalled(timedelta(seconds=5))
    assert list(stalled) == ["stuck"]
    assert loops.stalled(timedelta(days=365 * 100)) == {}


def test_readiness_names_an_unreachable_database_and_a_stalled_loop() -> None:
    """The report fails and names each failing check; liveness ignores the database."""

    def unreachable() -> bool:
        raise StoreUnavailable("connection refused")

    loops = Loops()
    loops.watch("worker", timedelta(seconds=1), lambda: 0.0)
    health = Health(
        loops, unreachable, stall_after=timedelta(seconds=1), exit_after=timedelta(days=365 * 100)
    )
    body = json.loads(health.readiness().body())
    assert body["status"] == "fail"
    assert body["failing"] == ["database", "loop:worker", "migrations"]
    # the driver's message names the database's host: kept out of a probe Slack's port answers
    assert body["checks"]["database"] == "unreachable (StoreUnavailable)"
    assert health.liveness().ok


def test_signoff_port_takes_0_for_any_free_port_and_refuses_what_is_no_port() -> None:
    """SIGNOFF_PORT is a TCP port or 0 (any free one); the demo provider's port may not be 0."""
    assert Settings.from_env({"SIGNOFF_PORT": "0"}).port == 0
    assert Settings.from_env({"SIGNOFF_PORT": "65535"}).port == 65535
    for wrong in ("65536", "-1", "http"):
        with pytest.raises(SettingsError, match="SIGNOFF_PORT must be a TCP port number"):
            Settings.from_env({"SIGNOFF_PORT": wrong})
    with pytest.raises(SettingsError, match="SIGNOFF_DEMO_PROVIDER_PORT"):
        Settings.from_env({"SIGNOFF_DEMO_PROVIDER_PORT": "0"})


def test_log_format_and_loop_limits_are_checked_when_read() -> None:
    """A bad SIGNOFF_LOG_FORMAT, or an exit limit below the stall limit, is refused."""
    with pytest.raises(SettingsError, match="SIGNOFF_LOG_FORMAT"):
        Settings.from_env({"SIGNOFF_LOG_FORMAT": "xml"})
    with pytest.raises(SettingsError, match="SIGNOFF_LOOP_EXIT_SECONDS"):
        Settings.from_env({"SIGNOFF_LOOP_STALL_SECONDS": "60", "SIGNOFF_LOOP_EXIT_SECONDS": "5"})
    settings = Settings.from_env(
        {
            "SIGNOFF_LOG_FORMAT": "JSON",
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SIGNOFF_DATABASE_URL": "postgresql://u:pw@h/db",
        }
    )
    assert settings.log_format == "json"
    assert set(settings.secrets()) == {"xoxb-1", "pw"}


class Recording:
    """A step observer that records what it is told, or fails if told to."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.seen: list[str] = []

    def step_committed(self, run: Run, step: StepRecord) -> None:
        """Record the step, or fail."""
        if self.fail:
            raise RuntimeError("observer bug")
        self.seen.append(step.name)

    def run_ended(self, run: Run) -> None:
        """Record the end, or fail."""
        if self.fail:
            raise RuntimeError("observer bug")
        self.seen.append(str(run.status))


def test_combined_observers_each_hear_everything_even_when_one_fails() -> None:
    """Metrics and the trace stream both observe; one raising does not silence the other."""
    broken, healthy = Recording(fail=True), Recording()
    observer = combined(broken, None, healthy)
    assert observer is not None
    at = datetime.now(UTC)
    run = Run(
        id=RunId("r" * 32),
        workflow="w",
        status=RunStatus.COMPLETED,
        input=None,
        created_at=at,
        updated_at=at,
    )
    observer.step_committed(
        run,
        StepRecord(
            position=0, kind=StepKind.STEP, name="s", input_hash="h", started_at=at, finished_at=at
        ),
    )
    observer.run_ended(run)
    assert healthy.seen == ["s", "completed"]
    assert combined(None, healthy) is healthy
