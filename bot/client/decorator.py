"""``@approval_required``: a function that runs only with the arguments a person approved."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from bot.client.api import SignoffClient

P = ParamSpec("P")
R = TypeVar("R")


def approval_required(
    client: SignoffClient,
    *,
    tool: str | None = None,
    policy: dict[str, Any] | str | None = None,
    timeout: float | None = None,
    **fields: Any,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Wrap a function so each call waits for sign-off of its arguments, then runs with
    exactly the approved (maybe edited) arguments, passed by name."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def gated(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            approved = client.require_approval(
                tool or fn.__name__, dict(bound.arguments), policy=policy, timeout=timeout, **fields
            )
            return fn(**approved.arguments)  # type: ignore[call-arg]

        return gated

    return wrap
