"""The threads that carry out what follows acks, each piece in its turn at the gate.

A listener acks, hands what follows to ``AfterAck.submit`` and returns, and the answer goes:
that hand-over is a queue put, on threads started with the app (a thread started on the
request's path would wait for the interpreter lock before the answer could go). Each piece
then waits at the process's ``AckGate`` while requests are being answered, within its bound.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bot.slack.ack_gate import AckGate

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0
THREADS = 64
"""Acknowledged requests carried out at once (decisions, modals, runs to create): each
mostly waits on the database or Slack, so more than the cores. They start once the process
has answered the requests in flight (``bot.slack.ack_gate``), together: as many as a batch
of decisions holds (``store.approval_store.BATCH_MOST``), so that a burst of clicks is
decided in one or two batches rather than one batch per handful of threads."""


class AfterAck:
    """``threads`` threads, all started now, carrying out work after acks (each piece once;
    pieces start in the order they were handed over) until ``close``.

    A process that stops closes it once it answers no more requests: what it acknowledged
    is then carried out before it goes (within its drain deadline)."""

    def __init__(
        self, gate: AckGate, threads: int = THREADS, *, name: str = "signoff-after"
    ) -> None:
        self._gate = gate
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=name)
        # the executor starts a thread on a submit that finds none idle: keep each busy
        # until all are started
        started = threading.Barrier(threads + 1, timeout=START_TIMEOUT_S)
        for _ in range(threads):
            self._pool.submit(started.wait)
        started.wait()

    def submit(self, work: Callable[..., object], *args: Any) -> None:
        """Carry out ``work(*args)`` on one of the threads, in its turn at the gate."""
        self._pool.submit(self._in_turn, time.monotonic(), work, args)

    def close(self) -> None:
        """Take no more work; return once every piece handed over is done."""
        self._pool.shutdown(wait=True)

    def _in_turn(self, due: float, work: Callable[..., object], args: tuple[Any, ...]) -> None:
        self._gate.wait_turn(due)
        try:
            work(*args)
        except Exception:  # the listeners tell their people; anything else is logged here
            logger.exception("work after an ack failed", extra={"action": "after_ack"})


__all__ = ["AfterAck"]
