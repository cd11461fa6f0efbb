"""The workflows the step and throughput benchmarks run, and the raw rows they are compared with.

``bench.payload`` takes ``n`` steps; each step is called with arguments (its index and a
short label) and returns an output whose canonical JSON is ``PAYLOAD_BYTES`` bytes, the
size of a small tool result.  The raw baselines write the very same JSON text per step.
"""

from __future__ import annotations

import json
from typing import Any

from agent_runtime.context import RunContext
from agent_runtime.serialization import canonical_json
from agent_runtime.workflows import Workflows

PAYLOAD_BYTES = 226
WORKFLOW = "bench.payload"
TRIVIAL = "bench.trivial"


def step_output(index: int, label: str) -> dict[str, Any]:
    """The output of step ``index``: canonical JSON of exactly ``PAYLOAD_BYTES`` bytes."""
    head = {"index": index, "label": label, "text": ""}
    filler = PAYLOAD_BYTES - len(canonical_json(head))
    return {**head, "text": "x" * filler}


def step_output_json(index: int) -> str:
    """The JSON text a raw baseline writes for step ``index``."""
    return json.dumps(step_output(index, "bench"), separators=(",", ":"), sort_keys=True)


def payload(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """``bench.payload``: ``n`` steps with arguments, each returning ``PAYLOAD_BYTES`` of JSON."""
    n = int(input["n"])
    for index in range(n):
        ctx.step(step_output, index, "bench", name=f"step {index}")
    return {"steps": n}


def trivial(ctx: RunContext, input: dict[str, Any]) -> dict[str, Any]:
    """``bench.trivial``: ``n`` steps without arguments that return None (for byte counts)."""
    n = int(input["n"])
    for index in range(n):
        ctx.step(_nothing, name=f"step {index}")
    return {"steps": n}


def _nothing() -> None:
    return None


def workloads() -> Workflows:
    """A registry holding ``bench.payload`` and ``bench.trivial``."""
    registry = Workflows()
    registry.add(WORKFLOW, payload)
    registry.add(TRIVIAL, trivial)
    return registry
