"""What reading a run back costs: inspect, fork planning and an eval re-run, per run length.

Run ``python -m bench.replay`` (``--quick`` for fewer repeats). For agent runs of N tool
turns (each turn a model call proposing a read-only lookup, then the lookup), recorded on
a SQLite file by a real worker, it reports medians of:

- ``load``: reading the run and its journal from the database (the baseline: nothing that
  reads a run back can be cheaper);
- ``inspect``: load, then rebuild the input of the last model call by replay and check it
  against its recorded hash (what ``signoff inspect`` does);
- ``eval``: load, replay the whole run, and re-run it with a scripted model whose tool
  calls are answered from the recording (what ``signoff eval`` does per run, minus the
  wait for a live model);

each with its ratio to ``load`` measured in the same process, interleaved repeat by
repeat, so the machine's load affects both alike.

A second table times what a worker pays to resume a run before its last turn, at 50, 100
and 200 turns: a pending run holding the journal up to the last model call is claimed, its
journal loaded and replayed, the last model call made (scripted, instant) and the run
completed. It is timed twice, interleaved: with the journal as written now (each message
hashed once, format 2) and with the same journal as written before (every model step's
input hashed whole, format 1, which old journals keep); medians with their min-max, and the
ratio of format 1 to format 2, and the median CPU milliseconds of each (the worker runs in
the benchmark's process), which a busy machine moves least.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from agent_runtime import (
    Actor,
    Agent,
    AgentInput,
    RunId,
    Runtime,
    Tools,
    WorkerOptions,
    tool,
)
from agent_runtime.deployment import Deployment
from agent_runtime.evals import compare
from agent_runtime.model_input import model_input, model_positions
from agent_runtime.models import ModelRequest, ModelResponse, ScriptedModel, ToolCall
from agent_runtime.models.scripted import text_reply, tool_reply
from agent_runtime.records import Fork, Run, StepRecord
from agent_runtime.request_digest import legacy_request_hash
from store import open_store
from store.approval_store import SqlApprovalStore

TURN_COUNTS = (10, 50, 200)
RESUME_TURN_COUNTS = (50, 100, 200)


def _lookup(order_id: str) -> dict[str, Any]:
    """Look an order up."""
    return {"id": order_id, "status": "delivered", "amount_cents": 4999}


def _model(turns: int) -> ScriptedModel:
    def respond(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done >= turns:
            return text_reply(f"looked up {done} orders")
        return tool_reply(
            ToolCall(id=f"call_{done}", name="_lookup", arguments={"order_id": str(1000 + done)})
        )

    return ScriptedModel(respond, name="bench-scripted")


def _agent(turns: int) -> Agent:
    return Agent(
        name="bench",
        model=_model(turns),
        system_prompt="Look every order up.",
        tools=Tools(tool(_lookup)),
        max_turns=turns + 1,
    )


def _record(runtime: Runtime, agent: Agent) -> RunId:
    data = AgentInput(task="look the orders up", requester=Actor(user_id="U_BENCH")).to_json()
    run_id = runtime.start(agent.workflow, data).id
    runtime.worker(WorkerOptions(owner="bench", lease_ttl=timedelta(minutes=5))).run_once()
    return run_id


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure(turns: int, repeats: int, directory: Path) -> dict[str, float]:
    """Median milliseconds of load, inspect and eval for a run of ``turns`` tool turns."""
    store = open_store(f"sqlite:///{directory / f'replay-{turns}.db'}")
    agent = _agent(turns)
    deployment = Deployment(store, SqlApprovalStore(store.engine), [agent])
    approvals = deployment.approvals
    run_id = _record(deployment.runtime, agent)

    def load() -> tuple[Any, Any]:
        return store.get_run(run_id), store.load_journal(run_id)

    def inspect() -> None:
        run, journal = load()
        seen = model_input(agent, approvals, run, journal, model_positions(journal)[-1])
        assert seen.identical

    def evaluate() -> None:
        run, journal = load()
        result = compare(agent, _agent(turns), approvals, run, journal)
        assert result.agrees

    samples: dict[str, list[float]] = {"load": [], "inspect": [], "eval": []}
    for _ in range(repeats):
        for name, action in (("load", load), ("inspect", inspect), ("eval", evaluate)):
            samples[name].append(_timed(action) * 1000)
    store.engine.dispose()
    return {name: statistics.median(values) for name, values in samples.items()}


def _format_1(
    agent: Agent, approvals: Any, run: Run, journal: Sequence[StepRecord]
) -> list[StepRecord]:
    """The journal as written before format 2: each model step's input hashed whole."""
    steps = list(journal)
    for position in model_positions(journal):
        request = model_input(agent, approvals, run, journal, position).request
        steps[position] = replace(steps[position], input_hash=legacy_request_hash(request))
    return steps


def _resume(
    runtime: Runtime, run: Run, steps: Sequence[StepRecord], last: int
) -> tuple[float, float]:
    """Milliseconds (wall clock, then this process's CPU) a worker takes to claim, replay
    and finish a run holding ``steps[:last]``."""
    fork = runtime.start(
        run.workflow, run.input, fork=Fork(source=run.id, at=last, steps=tuple(steps[:last]))
    )
    worker = runtime.worker(WorkerOptions(owner="bench", lease_ttl=timedelta(minutes=5)))
    cpu = time.process_time()
    elapsed = _timed(worker.run_once)
    cpu = time.process_time() - cpu
    finished = runtime.get(fork.id)
    assert finished.status == "completed", finished.error
    return elapsed * 1000, cpu * 1000


def measure_resume(
    turns: int, repeats: int, directory: Path
) -> dict[str, list[tuple[float, float]]]:
    """Milliseconds (wall, CPU) to resume a run of ``turns`` turns before its last, per hash
    format."""
    store = open_store(f"sqlite:///{directory / f'resume-{turns}.db'}")
    agent = _agent(turns)
    deployment = Deployment(store, SqlApprovalStore(store.engine), [agent])
    runtime = deployment.runtime
    run = runtime.get(_record(runtime, agent))
    journal = runtime.journal(run.id)
    last = model_positions(journal)[-1]
    formats = {
        "format 2": journal,
        "format 1": _format_1(agent, deployment.approvals, run, journal),
    }
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in formats}
    for repeat in range(repeats):
        order = list(formats) if repeat % 2 == 0 else list(reversed(formats))
        for name in order:
            samples[name].append(_resume(runtime, run, formats[name], last))
    store.engine.dispose()
    return samples


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} ({min(values):.1f}-{max(values):.1f})"


def print_resume(repeats: int, directory: Path) -> None:
    """Print the resume table: median (min-max) wall ms per hash format, their ratio, and
    the median CPU ms of each (the figure a busy machine moves least)."""
    print(
        f"\nresume before the last turn, median (min-max) ms over {repeats} repeats (SQLite file)"
    )
    print(
        f"{'turns':>6} {'format 2 (now)':>22} {'format 1 (before)':>22} {'ratio':>6} "
        f"{'cpu now':>8} {'cpu before':>11}"
    )
    for turns in RESUME_TURN_COUNTS:
        found = measure_resume(turns, repeats, directory)
        now, before = found["format 2"], found["format 1"]
        wall_now, wall_before = [w for w, _ in now], [w for w, _ in before]
        ratio = statistics.median(wall_before) / statistics.median(wall_now)
        print(
            f"{turns:>6} {_spread(wall_now):>22} {_spread(wall_before):>22} {ratio:>5.1f}x "
            f"{statistics.median(c for _, c in now):>8.1f} "
            f"{statistics.median(c for _, c in before):>11.1f}"
        )


def main(argv: list[str] | None = None) -> None:
    """Print a table of medians and ratios to the journal load."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.replay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    repeats = 5 if args.quick else 21
    print(f"median ms over {repeats} repeats (SQLite file); ratio to loading the journal")
    print(
        f"{'turns':>6} {'entries':>8} {'load':>8} {'inspect':>9} {'ratio':>6} "
        f"{'eval':>9} {'ratio':>6}"
    )
    with tempfile.TemporaryDirectory(prefix="signoff-bench-") as tmp:
        for turns in TURN_COUNTS:
            found = measure(turns, repeats, Path(tmp))
            entries = 2 * turns + 2
            print(
                f"{turns:>6} {entries:>8} {found['load']:>8.2f} {found['inspect']:>9.2f} "
                f"{found['inspect'] / found['load']:>5.1f}x {found['eval']:>9.2f} "
                f"{found['eval'] / found['load']:>5.1f}x"
            )
        print_resume(repeats, Path(tmp))


if __name__ == "__main__":
    main()
