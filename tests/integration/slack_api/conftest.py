"""Fixtures of the local Slack Web API tests: a fake clock, the API on a free port, a real
``WebClient`` pointed at it and a person in its workspace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient

from devkit.sandbox.slack_api import (
    RunningSlackApi,
    User,
    Workspace,
    start_slack_api,
)
from tests.integration.slack_api import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock starting at ``EPOCH``."""
    return FakeClock()


@pytest.fixture
def slack(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningSlackApi]:
    """A local Slack Web API on a free loopback port, on a workspace with the fake clock."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with start_slack_api(Workspace(clock=clock)) as running:
        yield running


@pytest.fixture
def client(slack: RunningSlackApi) -> WebClient:
    """A real ``WebClient`` pointed at the local API with the right token."""
    return WebClient(token="xoxb-test", base_url=slack.url + "/api/")


@pytest.fixture
def dana(slack: RunningSlackApi) -> User:
    """A person in the workspace."""
    return slack.workspace.add_user("dana", real_name="Dana Scully")
