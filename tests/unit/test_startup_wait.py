"""Waiting for the database at start: backoff, one log line per failed attempt with the
password masked, a clear error past the bound, and what the probes are told meanwhile."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

import pytest

from agent_runtime import StoreUnavailable
from bot.app.settings import Settings, SettingsError
from bot.ops.startup import Startup, when_reachable
from store import masked_url

URL = "postgresql+psycopg://signoff:hunter2@db.internal:5432/signoff"


class FakeTime:
    """A monotonic clock that only sleeping advances."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        """Advance the clock by ``seconds``."""
        self.slept.append(seconds)
        self.now += seconds


def failing(times: int) -> tuple[list[int], Callable[[], str]]:
    """Return a call counter and an opener that fails ``times`` times, then returns 'db'."""
    calls: list[int] = []

    def open_database() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise StoreUnavailable("connection failed: Connection refused")
        return "db"

    return calls, open_database


def test_the_password_is_masked() -> None:
    """The URL shown keeps host, port and user, and hides the password."""
    assert masked_url(URL) == "postgresql+psycopg://signoff:***@db.internal:5432/signoff"
    assert masked_url("not a url") == "(the configured database URL)"


def test_it_retries_with_backoff_and_logs_each_failure_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Four failures are retried after 0.5, 1, 2 and 4 s, each logged once, password masked."""
    time = FakeTime()
    calls, open_database = failing(4)
    with caplog.at_level(logging.WARNING, logger="bot.ops.startup"):
        found = when_reachable(
            open_database,
            url=URL,
            wait=timedelta(seconds=60),
            sleep=time.sleep,
            clock=lambda: time.now,
        )
    assert found == "db"
    assert len(calls) == 5
    assert time.slept == [0.5, 1.0, 2.0, 4.0]
    messages = [r.getMessage() for r in caplog.records if r.name == "bot.ops.startup"]
    assert len(messages) == 4
    assert messages[0] == (
        "database unreachable at start (attempt 1, "
        "postgresql+psycopg://signoff:***@db.internal:5432/signoff): "
        "connection failed: Connection refused; trying again in 0.5 s"
    )
    assert not any("hunter2" in m for m in messages)


def test_backoff_is_capped_and_it_gives_up_at_the_bound() -> None:
    """Waits never exceed 5 s nor the time left; past the bound the last error is raised,
    saying how long it tried."""
    time = FakeTime()
    _, open_database = failing(1000)
    with pytest.raises(StoreUnavailable) as raised:
        when_reachable(
            open_database,
            url=URL,
            wait=timedelta(seconds=20),
            sleep=time.sleep,
            clock=lambda: time.now,
        )
    assert time.slept == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 2.5]
    assert time.now == 20.0
    assert str(raised.value) == (
        "the database at postgresql+psycopg://signoff:***@db.internal:5432/signoff could not "
        "be reached within 20 s (SIGNOFF_STARTUP_DB_WAIT_SECONDS): "
        "connection failed: Connection refused"
    )
    assert raised.value.retryable


def test_other_errors_are_not_retried() -> None:
    """An error that is not the database being unreachable ends the start at once."""

    def broken() -> str:
        raise ValueError("bad configuration")

    with pytest.raises(ValueError, match="bad configuration"):
        when_reachable(
            broken, url=URL, wait=timedelta(seconds=60), sleep=lambda _: pytest.fail("slept")
        )


def test_the_bound_is_a_setting_of_60_seconds_by_default() -> None:
    """``SIGNOFF_STARTUP_DB_WAIT_SECONDS`` sets the bound; unset it is 60 s; it must be positive."""
    assert Settings.from_env({}).startup_db_wait == timedelta(seconds=60)
    found = Settings.from_env({"SIGNOFF_STARTUP_DB_WAIT_SECONDS": "5"}).startup_db_wait
    assert found == timedelta(seconds=5)
    with pytest.raises(SettingsError, match="SIGNOFF_STARTUP_DB_WAIT_SECONDS must be positive"):
        Settings.from_env({"SIGNOFF_STARTUP_DB_WAIT_SECONDS": "0"})


def test_startup_reports_each_failure_by_its_class_and_the_time_left() -> None:
    """Alive while starting; not ready, naming the driver error's class (never its message)
    and how long the process keeps trying, nor once the database answered until it is up."""
    time = FakeTime()
    startup = Startup(clock=lambda: time.now)
    assert startup.liveness().status == "starting"
    assert startup.liveness().ok
    assert startup.readiness().checks == {"database": "connecting", "startup": "first attempt"}
    _, open_database = failing(2)

    def open_with_cause() -> str:
        try:
            return open_database()
        except StoreUnavailable:
            raise StoreUnavailable("connection failed: hunter2@db") from ConnectionRefusedError()

    seen: list[dict[str, str]] = []

    def sleep(seconds: float) -> None:
        seen.append(startup.readiness().checks)
        time.sleep(seconds)

    when_reachable(
        open_with_cause,
        url=URL,
        wait=timedelta(seconds=10),
        sleep=sleep,
        clock=lambda: time.now,
        startup=startup,
    )
    assert seen == [
        {"database": "unreachable (ConnectionRefusedError)", "startup": _tried(1, 10.0)},
        {"database": "unreachable (ConnectionRefusedError)", "startup": _tried(2, 9.5)},
    ]
    assert startup.failures == 2
    assert startup.readiness().checks == {"database": "ok", "startup": "starting its parts"}
    assert not startup.up
    startup.finished()
    assert startup.readiness().ok
    assert startup.liveness().status == "ok"


def _tried(failures: int, left: float) -> str:
    return f"{failures} attempts failed, giving up in {left:.1f} s"
