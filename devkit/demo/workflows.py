"""Built-in diagnostic workflows, used by the walkthrough, the crash tests and the benchmark."""

from __future__ import annotations

import os
import time
from typing import Any

from agent_runtime.context import RunContext
from agent_runtime.workflows import Workflows


def append_line(path: str, index: int, delay_ms: int) -> int:
    """Sleep ``delay_ms`` then append ``step <index>`` to the file at ``path``, durably."""
    if delay_ms:
        time.sleep(delay_ms / 1000)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"step {index}\n")
        handle.flush()
        os.fsync(handle.fileno())
    return index


def steps(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """``demo.steps``: ``n`` steps, each sleeping ``delay_ms`` and appending a line to ``path``."""
    n, delay_ms, path = _parse(input)
    for index in range(1, n + 1):
        ctx.step(append_line, path, index, delay_ms, name=f"step {index}")
    return {"steps": n}


def trivial(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """``demo.trivial``: ``n`` steps that do nothing, to measure the engine's own cost."""
    n = int(input.get("n", 20))
    for index in range(n):
        ctx.step(_nothing, name=f"step {index}")
    return {"steps": n}


def _nothing() -> None:
    return None


def _parse(input: Any) -> tuple[int, int, str]:
    if not isinstance(input, dict) or not isinstance(input.get("path"), str):
        raise ValueError('demo.steps needs input like {"n": 5, "delay_ms": 500, "path": "out.txt"}')
    n, delay_ms = input.get("n", 5), input.get("delay_ms", 0)
    if not isinstance(n, int) or not isinstance(delay_ms, int) or n < 0 or delay_ms < 0:
        raise ValueError("demo.steps: n and delay_ms must be non-negative integers")
    return n, delay_ms, input["path"]


def demo_workflows() -> Workflows:
    """Return a registry holding the built-in diagnostic workflows."""
    registry = Workflows()
    registry.add("demo.steps", steps, validate=_parse)
    registry.add("demo.trivial", trivial)
    return registry
