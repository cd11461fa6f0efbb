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


class AfterAck:
    """``threads`` threads, all started now, carrying out work after acks (each piece once;
    pieces start in the order they were handed over)."""

    def __init__(self, threads: int, gate: AckGate, *, name: str = "signoff-after") -> None:
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

    def _in_turn(self, due: float, work: Callable[..., object], args: tuple[Any, ...]) -> None:
        self._gate.wait_turn(due)
        try:
            work(*args)
        except Exception:  # the listeners tell their people; anything else is logged here
            logger.exception("work after an ack failed", extra={"action": "after_ack"})


__all__ = ["AfterAck"]
