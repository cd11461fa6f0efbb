"""Acks first: what follows an ack waits while the process is still answering Slack.

A process is Python with one interpreter lock, on cores it shares. Under a burst of Slack
requests, the answer to the last one waits behind the CPU of every answer before it and of
every piece of work that followed an earlier ack (a decision, a run to create, an outbox
round): all compete for the same lock. Slack wants each answer within 3 s; the work behind
an answer has no such limit. So ``AckGate`` counts the Slack requests this process is
answering, and the work that follows acks waits its turn at the gate: until no request is
in flight, and, after a burst (more than one request since the gate was last quiet), until
none has been for ``quiet`` seconds, so that the rest of a burst still arriving is read
first; never more than ``longest_wait`` seconds after the work was due, so that a steady
stream of requests delays it by a bounded time and never starves it. After a lone request,
its work goes at once.

The lock and the cores are the process's, so a process has one gate: ``signoff serve``
builds it and hands it to the HTTP front that counts, to the listeners' ``AfterAck`` and to
the outbox dispatcher's rounds, which wait at it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

QUIET_S = 0.02
"""How long no request must be in flight after a burst before work waiting at the gate
starts: enough for the server to read the next request of a burst that is still arriving."""
LONGEST_WAIT_S = 1.0
"""The longest work waits at the gate, counted from when it was due."""

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class AckGate:
    """Counts the requests being answered; holds work back while any is, within a bound."""

    def __init__(self, *, quiet: float = QUIET_S, longest_wait: float = LONGEST_WAIT_S) -> None:
        self.quiet = quiet
        self.longest_wait = longest_wait
        self._changed = threading.Condition(threading.Lock())
        self._in_flight = 0
        self._last_answer = -float("inf")  # time.monotonic() when the last request ended
        self._burst = 0  # requests begun since the gate was last quiet
        self._waiting = 0

    @property
    def in_flight(self) -> int:
        """How many requests are being answered now."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """How many pieces of work wait at the gate now."""
        return self._waiting

    @contextmanager
    def answering(self) -> Iterator[None]:
        """Count one request in flight while the block runs."""
        with self._changed:
            if self._in_flight == 0 and time.monotonic() >= self._last_answer + self.quiet:
                self._burst = 0
            self._burst += 1
            self._in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self._in_flight -= 1
                self._last_answer = time.monotonic()
                if self._in_flight == 0:
                    self._changed.notify_all()

    def counted(self, application: WSGIApp) -> WSGIApp:
        """Wrap a WSGI application so that each of its requests counts while it is answered."""

        def answer(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            with self.answering():
                return application(environ, start_response)

        return answer

    def wait_turn(self, due: float | None = None) -> float:
        """Block until no request is in flight (after a burst: for ``quiet`` seconds), or
        until ``longest_wait`` after ``due`` (a ``time.monotonic()``; default now). Return
        the seconds waited."""
        started = time.monotonic()
        deadline = (started if due is None else due) + self.longest_wait
        with self._changed:
            self._waiting += 1
            try:
                while True:
                    now = time.monotonic()
                    if now >= deadline:
                        break
                    if self._in_flight == 0:
                        quiet_from = self._last_answer + self.quiet
                        if now >= quiet_from or self._burst <= 1:
                            break
                        self._changed.wait(min(quiet_from, deadline) - now)
                    else:
                        self._changed.wait(deadline - now)
            finally:
                self._waiting -= 1
        return time.monotonic() - started


__all__ = ["LONGEST_WAIT_S", "QUIET_S", "AckGate"]
