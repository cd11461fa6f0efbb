"""How a failing step is retried."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent_runtime.records import AttemptRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Attempts and backoff for one step; errors named in ``non_retryable`` fail at once."""

    max_attempts: int = 3
    initial_interval: timedelta = timedelta(seconds=1)
    backoff: float = 2.0
    max_interval: timedelta = timedelta(seconds=60)
    non_retryable: tuple[type[BaseException], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.backoff < 1:
            raise ValueError("backoff must be at least 1")

    def delay_after(self, attempt: int) -> timedelta:
        """Return the pause before the attempt that follows failed attempt number ``attempt``."""
        seconds = self.initial_interval.total_seconds() * self.backoff ** (attempt - 1)
        return min(timedelta(seconds=seconds), self.max_interval)

    def should_retry(self, attempt: int, error: BaseException) -> bool:
        """Tell whether a failure of attempt number ``attempt`` with ``error`` gets another try."""
        if attempt >= self.max_attempts or isinstance(error, self.non_retryable):
            return False
        return getattr(error, "retryable", True) is not False

    def retry_at(self, failed: AttemptRecord, error: BaseException | None = None) -> datetime:
        """Return the earliest time for the attempt that follows the recorded ``failed`` one:
        the policy's delay, or the longer pause the ``error`` asked for (its ``retry_after``,
        a provider's ``Retry-After``, say), at most ``max_interval``."""
        delay = self.delay_after(failed.attempt)
        asked = getattr(error, "retry_after", None)
        if isinstance(asked, timedelta) and asked > delay:
            delay = min(asked, self.max_interval)
        return failed.at + delay

    def gave_up_after(self, failed: AttemptRecord) -> bool:
        """Tell whether a recorded failure, read back by another worker, was the step's last.

        The record keeps the error's class name only, so a failure that was final through
        the error's own ``retryable`` flag reads back as one that may be retried.
        """
        names = {kind.__name__ for kind in self.non_retryable}
        return failed.attempt >= self.max_attempts or failed.error.type in names


NO_RETRY = RetryPolicy(max_attempts=1)
"""Run a step once; its first failure is final."""
