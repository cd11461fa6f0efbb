"""How a failing step is retried."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta


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


NO_RETRY = RetryPolicy(max_attempts=1)
"""Run a step once; its first failure is final."""
