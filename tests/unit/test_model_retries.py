"""One retry vocabulary: a model step's RetryPolicy alone decides how often a provider is asked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import responses

from agent_runtime import Agent, RetryPolicy, RunStatus, Tools
from agent_runtime.exceptions import ModelError
from agent_runtime.models import HttpOptions, OpenAIChatModel
from agent_runtime.records import AttemptRecord, ErrorInfo
from agent_runtime.testing import AgentEnvironment

BASE = "https://models.test/v1"
URL = f"{BASE}/chat/completions"
POLICY = RetryPolicy(
    max_attempts=3, initial_interval=timedelta(seconds=1), max_interval=timedelta(seconds=30)
)
AGENT = Agent(
    name="asker",
    model=OpenAIChatModel(model="gpt-test", options=HttpOptions(base_url=BASE)),
    system_prompt="answer",
    tools=Tools(),
    model_retry=POLICY,
)


def _failed(attempt: int) -> AttemptRecord:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return AttemptRecord(
        position=0, attempt=attempt, error=ErrorInfo(type="ModelError", message="429"), at=at
    )


def test_a_longer_retry_after_replaces_the_policys_delay_up_to_its_maximum() -> None:
    """The pause a provider asks for wins over a shorter backoff, never past max_interval."""
    failed = _failed(1)
    asked = ModelError("busy", retryable=True, retry_after=timedelta(seconds=7))
    too_long = ModelError("busy", retryable=True, retry_after=timedelta(hours=1))
    assert POLICY.retry_at(failed, asked) - failed.at == timedelta(seconds=7)
    assert POLICY.retry_at(failed, too_long) - failed.at == timedelta(seconds=30)
    assert POLICY.retry_at(failed, ModelError("busy")) - failed.at == timedelta(seconds=1)


@responses.activate
def test_a_failing_provider_is_asked_once_per_attempt_of_the_step() -> None:
    """A provider answering 429 forever gets max_attempts requests, each after its Retry-After."""
    responses.post(URL, status=429, headers={"Retry-After": "5"}, json={"error": "slow down"})
    env = AgentEnvironment(AGENT)
    started = env.clock.now()
    run = env.run_until_waiting(env.start("hello"))
    assert run.status == RunStatus.FAILED
    assert len(responses.calls) == POLICY.max_attempts
    assert env.clock.now() - started >= timedelta(seconds=5 * (POLICY.max_attempts - 1))
