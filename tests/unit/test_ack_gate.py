"""Acks first: work after an ack waits while requests are answered, within its bound."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bot.slack.ack_gate import AckGate
from bot.slack.after_ack import AfterAck
from store.approval_store import BATCH_MOST

PATIENT = 60.0
"""A bound no test reaches: work waits for the requests, not for the bound."""
TIMEOUT_S = 10.0


def until(probe: Callable[[], bool], what: str) -> None:
    """Wait until ``probe()`` holds; fail after ``TIMEOUT_S``."""
    deadline = time.monotonic() + TIMEOUT_S
    while not probe():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


def test_work_waits_while_a_request_is_answered_and_runs_once_it_is() -> None:
    """A piece handed over during a request waits at the gate until the request ends."""
    gate = AckGate(quiet=0.0, longest_wait=PATIENT)
    after = AfterAck(gate, 2)
    ran = threading.Event()
    with gate.answering():
        after.submit(ran.set)
        until(lambda: gate.waiting == 1, "the work to wait at the gate")
        assert not ran.is_set()
    assert ran.wait(TIMEOUT_S)
    assert gate.waiting == 0


def test_work_waits_at_most_its_bound_while_requests_never_stop() -> None:
    """Requests in flight all along do not starve the work: it runs at its bound."""
    gate = AckGate(quiet=0.0, longest_wait=0.2)
    after = AfterAck(gate, 1)
    started: list[float] = []
    with gate.answering():
        handed = time.monotonic()
        after.submit(lambda: started.append(time.monotonic()))
        until(lambda: bool(started), "the work to run")
        assert gate.in_flight == 1, "it ran while the request was still being answered"
    assert 0.2 <= started[0] - handed < TIMEOUT_S


def test_work_after_a_lone_request_goes_as_soon_as_it_is_answered() -> None:
    """With no burst (one request since the gate was quiet), the work waits for no quiet."""
    gate = AckGate(quiet=PATIENT, longest_wait=PATIENT)
    after = AfterAck(gate, 1)
    ran = threading.Event()
    with gate.answering():
        after.submit(ran.set)
        until(lambda: gate.waiting == 1, "the work to wait at the gate")
    assert ran.wait(TIMEOUT_S)


@contextmanager
def work_held_in_a_burst(gate: AckGate) -> Iterator[list[float]]:
    """A burst of two requests with work submitted during the first and waiting at the gate;
    the body runs as the burst's last request ends. Yields when the work started (empty
    until it runs)."""
    after = AfterAck(gate, 1)
    started: list[float] = []
    with gate.answering():
        after.submit(lambda: started.append(time.monotonic()))
        until(lambda: gate.waiting == 1, "the work to wait at the gate")
        with gate.answering():
            pass
        yield started


def test_work_after_a_burst_waits_for_the_quiet_after_its_last_request() -> None:
    """Once the last request of a burst ends, the work still waits ``quiet`` for more."""
    gate = AckGate(quiet=0.2, longest_wait=PATIENT)
    with work_held_in_a_burst(gate) as started:
        ending = time.monotonic()
    until(lambda: bool(started), "the work to run")
    assert started[0] - ending >= 0.2


def test_a_request_arriving_in_the_quiet_starts_the_quiet_again() -> None:
    """A request that starts before the quiet after a burst is over holds the work back
    until a whole quiet after it ends."""
    gate = AckGate(quiet=0.5, longest_wait=PATIENT)
    with work_held_in_a_burst(gate) as started:
        pass
    with gate.answering():
        assert not started
        ending = time.monotonic()
    until(lambda: bool(started), "the work to run")
    assert started[0] - ending >= 0.5


def test_every_piece_runs_once_in_the_order_it_was_handed_over() -> None:
    """Pieces held back by a burst are none of them lost, and run in order (one thread)."""
    gate = AckGate(quiet=0.0, longest_wait=PATIENT)
    after = AfterAck(gate, 1)
    done: list[int] = []
    with gate.answering():
        for i in range(20):
            after.submit(done.append, i)
        until(lambda: gate.waiting == 1, "the first piece to wait at the gate")
        assert done == []
    until(lambda: len(done) == 20, "every piece to run")
    assert done == list(range(20))


def test_a_failing_piece_is_logged_and_the_next_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An exception in one piece is logged and leaves the thread to carry out the next."""
    after = AfterAck(AckGate(quiet=0.0), 1)
    ran = threading.Event()

    def fails() -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="bot.slack.after_ack"):
        after.submit(fails)
        after.submit(ran.set)
        assert ran.wait(TIMEOUT_S)
    assert [r.getMessage() for r in caplog.records] == ["work after an ack failed"]


def test_a_wsgi_request_counts_while_it_is_answered() -> None:
    """``counted`` counts a request from the call of the application until it returns."""
    gate = AckGate()
    release = threading.Event()

    def slow(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        release.wait(TIMEOUT_S)
        start_response("200 OK", [])
        return [b"ok"]

    answers: list[Iterable[bytes]] = []
    counted = gate.counted(slow)
    thread = threading.Thread(target=lambda: answers.append(counted({}, lambda *a: None)))
    thread.start()
    until(lambda: gate.in_flight == 1, "the request to count")
    release.set()
    thread.join(TIMEOUT_S)
    assert answers == [[b"ok"]]
    assert gate.in_flight == 0


def test_its_threads_are_started_with_it() -> None:
    """Handing work over starts no thread: they all exist once ``AfterAck`` does."""
    name = "signoff-after-started-with-it"

    def its_threads() -> int:  # other tests' threads may end meanwhile: count only these
        return sum(t.name.startswith(name) for t in threading.enumerate())

    assert its_threads() == 0
    after = AfterAck(AckGate(), 4, name=name)
    assert its_threads() == 4
    done = threading.Barrier(5, timeout=TIMEOUT_S)
    for _ in range(4):
        after.submit(done.wait)
    done.wait()
    assert its_threads() == 4


def test_a_burst_of_clicks_as_large_as_a_batch_of_decisions_is_released_at_once() -> None:
    """The listeners' pool holds a whole batch of decisions at the gate, so a burst's
    decisions start together once the burst is answered and can share one transaction."""
    gate = AckGate(quiet=0.0, longest_wait=PATIENT)
    after = AfterAck(gate, name="signoff-after-burst")
    together = threading.Barrier(BATCH_MOST, timeout=TIMEOUT_S / 2)
    passed: list[int] = []

    def decide() -> None:  # each piece waits until all are under way at the same time
        passed.append(together.wait())

    with gate.answering():
        for _ in range(BATCH_MOST):
            after.submit(decide)
        until(lambda: gate.waiting == BATCH_MOST, "every piece to wait at the gate")
    until(lambda: len(passed) == BATCH_MOST, "every piece to be under way at once")
