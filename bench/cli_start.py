"""Start-up time of the ``signoff`` command: how long a person waits for ``signoff runs``.

Run ``python -m bench.cli_start`` (``--quick`` for fewer repeats).

Set-up, removed at the end: a SQLite file, migrated, with the agent of ``bench.cli_agent``
configured (``SIGNOFF_AGENT``: one gated tool, nothing imported beyond the runtime, so that
what is timed is Signoff's own start-up) and a run for each ``approve`` timed (one more for
the untimed first call), each waiting on one pending approval of its refund. The timed
processes cache their compiled modules (in the scratch directory), as an installed
``signoff`` has them.

Repeat by repeat, interleaved (the order rotating) after one untimed call of each, it times
the wall time of a whole process, from its start to its exit:

- ``python -c pass`` and ``python -c "import sqlalchemy"``: the floor of any Python command,
  and of one that reads a database through SQLAlchemy;
- ``signoff --help``, ``signoff worker --help``: building the parser (plugins included);
- ``signoff runs``: listing the runs;
- ``signoff approve ID --as U_BENCH``: an accepted decision of the next pending approval
  (its audit entry, its run's wake-up), as a person types it after reading a card.

It prints each one's median with its spread (lowest-highest repeat), and the goal verdict:
``signoff runs`` and ``signoff approve`` under 300 ms. Numbers move with the machine's load:
the goal is for a quiet machine, so rerun before concluding.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench._common import take_turns

REPO_ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 0.300
"""The longest ``signoff runs`` and ``signoff approve`` may take (wall time)."""
GOAL_COMMANDS = ("signoff runs", "signoff approve")
AGENT = "bench.cli_agent:agent"


def bench_env(database: Path) -> dict[str, str]:
    """The environment of the timed processes: this one's, without Signoff's settings, on
    ``database``, with the benchmark's agent and this checkout importable first, and the
    compiled modules cached (beside ``database``) as an installed ``signoff`` has them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(
        PYTHONPYCACHEPREFIX=str(database.parent / "pycache"),
        SIGNOFF_DATABASE_URL=f"sqlite:///{database}",
        SIGNOFF_AGENT=AGENT,
    )
    return env


def signoff_command() -> list[str]:
    """The ``signoff`` script beside this Python, as a person runs it."""
    script = Path(sys.executable).with_name("signoff")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bot.cli.main"]


def seed(env: dict[str, str], count: int) -> list[str]:
    """Start ``count`` runs of the agent, each with one pending approval; return their ids."""
    from agent_runtime import Actor, AgentInput, SystemClock
    from bench.cli_agent import refund
    from bot.app.settings import Settings
    from bot.app.wiring import build_services

    services = build_services(Settings.from_env(env))
    agent = services.agents.get(None)
    assert refund.approval is not None
    requester = Actor(user_id="U_RITA", name="rita")
    ids: list[str] = []
    for number in range(count):
        task = AgentInput(task=f"refund order {1000 + number}", requester=requester)
        run = services.runtime.start(agent.workflow, task.to_json())
        approval = services.approvals.request(
            run_id=run.id,
            position=1,
            tool=refund,
            args={"order_id": str(1000 + number), "amount_cents": 4999},
            policy=refund.approval.snapshot(agent.approver_groups),
            requester=requester,
            now=SystemClock().now(),
        )
        ids.append(approval.id)
    services.stores.engine.dispose()
    return ids


def timer(command: list[str] | Callable[[], list[str]], env: dict[str, str]) -> Callable[[], float]:
    """A function that runs ``command`` (or the one a function gives) and returns its wall
    time; a failing command stops the benchmark."""

    def run() -> float:
        argv = command() if callable(command) else command
        began = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
        return time.perf_counter() - began

    return run


def contestants(env: dict[str, str], approvals: list[str]) -> dict[str, Callable[[], float]]:
    """Every command timed, by the name the table gives it."""
    signoff = signoff_command()
    pending = iter(approvals)
    return {
        "python -c pass": timer([sys.executable, "-c", "pass"], env),
        'python -c "import sqlalchemy"': timer([sys.executable, "-c", "import sqlalchemy"], env),
        "signoff --help": timer([*signoff, "--help"], env),
        "signoff worker --help": timer([*signoff, "worker", "--help"], env),
        "signoff runs": timer([*signoff, "runs"], env),
        "signoff approve": timer(
            lambda: [*signoff, "approve", next(pending), "--as", "U_BENCH"], env
        ),
    }


def row(name: str, times: list[float]) -> list[str]:
    """The table's row: the median and the lowest-highest repeat, in milliseconds."""
    ms = [t * 1000 for t in times]
    return [name, f"{statistics.median(ms):.0f}", f"{min(ms):.0f}-{max(ms):.0f}"]


def main() -> None:
    """Measure and print the table and the verdict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--repeats", type=int, default=None, help="default 15, 5 with --quick")
    options = parser.parse_args()
    repeats = options.repeats or (5 if options.quick else 15)
    with tempfile.TemporaryDirectory() as scratch:
        env = bench_env(Path(scratch) / "signoff.db")
        approvals = seed(env, repeats + 1)  # one more for the untimed first call
        print(f"{len(approvals)} runs, each with a pending approval; {repeats} repeats")
        times = take_turns(contestants(env, approvals), repeats)
    print("| command | median ms | lowest-highest |")
    print("|---|---:|---:|")
    for name, measured in times.items():
        print("| " + " | ".join(row(name, measured)) + " |")
    slowest = max(statistics.median(times[name]) for name in GOAL_COMMANDS)
    verdict = "met" if slowest < GOAL_S else "not met"
    print(f"goal: {' and '.join(GOAL_COMMANDS)} under {GOAL_S * 1000:.0f} ms: {verdict}")


if __name__ == "__main__":
    main()
