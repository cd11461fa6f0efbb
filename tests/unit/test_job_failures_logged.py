"""A scheduled job failing round after round says so once, then now and then, and says
when it is back: a database outage does not flood the log."""

from __future__ import annotations

import logging

import pytest

from agent_runtime import StoreUnavailable
from bot.app.scheduler import REPEAT_LOGGED_EVERY_S, Failing


class Clock:
    """Seconds that pass when a test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str, bool]]:
    return [(r.levelno, r.getMessage(), r.exc_info is not None) for r in caplog.records]


def test_an_outage_is_one_warning_then_a_reminder_then_the_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A job failing every 300 ms through ten minutes of outage logs one warning without a
    traceback, one reminder every five minutes, and one line when it is back (it logged
    each failure with its traceback: about 8 a second per process)."""
    clock = Clock()
    failing = Failing("dispatch", clock)
    down = StoreUnavailable("the database is unreachable")
    with caplog.at_level(logging.DEBUG, logger="bot.app.scheduler"):
        for _ in range(2100):  # ten and a half minutes at 300 ms
            failing.failed(down)
            clock.now += 0.3
        failing.succeeded()
        failing.succeeded()
    told = _records(caplog)
    paused = "scheduled job paused: the database is unreachable"
    still = "scheduled job still failing ({} times): the database is unreachable"
    assert told == [
        (logging.WARNING, paused, False),
        (logging.WARNING, still.format(1001), False),
        (logging.WARNING, still.format(2002), False),  # 300 s after the first reminder
        (logging.INFO, "scheduled job back after 2100 failures", False),
    ]
    assert 2 * REPEAT_LOGGED_EVERY_S <= 2100 * 0.3 < 3 * REPEAT_LOGGED_EVERY_S


def test_another_failure_is_logged_with_its_traceback_each_time_it_changes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An unexpected error is logged in full; the same one again is not, another one is."""
    failing = Failing("anchor", Clock())
    with caplog.at_level(logging.DEBUG, logger="bot.app.scheduler"):
        for error in (OSError("disk full"), OSError("disk full"), ValueError("bad")):
            try:
                raise error
            except Exception as exc:
                failing.failed(exc)
    assert _records(caplog) == [
        (logging.ERROR, "scheduled job failed", True),
        (logging.ERROR, "scheduled job failed", True),
    ]
