"""Kill points: a ``signoff`` process that SIGKILLs itself at a named point of its work.

The chaos suite (``bench.chaos``) runs ``python -m bench.kill_points --armed ARGS...``: the
very ``signoff ARGS...`` (``bot.cli.main``), with points installed around

- every public method of the stores (``store:SqlStore.append_step:before`` / ``:after``);
  the journal's commit is ``store:SqlStore.append_step`` (one autocommit statement),
- the commit of every transaction a store method opens, sent but not yet answered
  (``commit:SqlApprovalStore.decide_approvals`` is a decision's, in its batch),
- every tool execution (``tool:issue_refund:before`` / ``:after``: the money moved, the
  journal does not know yet),
- every outbox delivery (``slack:card:before`` / ``:after``: Slack has the message, the
  outbox does not know yet).

A point fires when the plan names it: the file ``SIGNOFF_CHAOS_KILL_FILE`` names holds
``{"point": NAME, "hit": N}``, and the process reaches NAME for the Nth time since the plan
was written (the file is read again whenever it changes, so a running process can be armed).
Firing writes ``<file>.fired`` (the point's name) and sends SIGKILL to the process itself.

Off in production: this module lives in ``bench/``, which is not installed with the package
and which nothing under ``agent_runtime/``, ``store/`` or ``bot/`` imports; and even run as
above, it installs nothing unless ``--armed`` comes first AND the variable names a file.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

KILL_FILE_ENV = "SIGNOFF_CHAOS_KILL_FILE"
ARMED_FLAG = "--armed"


class KillPlan:
    """The one point this process dies at, re-read from its file whenever the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: int | None = None
        self._point = ""
        self._hit = 0
        self._seen = 0

    def reached(self, point: str) -> None:
        """Count one arrival at ``point``; SIGKILL the process if it is the planned one."""
        with self._lock:
            self._reload()
            if point != self._point:
                return
            self._seen += 1
            if self._seen < self._hit:
                return
            fired = Path(f"{self.path}.fired")
            fired.write_text(point, encoding="utf-8")
        os.kill(os.getpid(), signal.SIGKILL)

    def _reload(self) -> None:
        try:
            stamp = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp:
            return
        self._stamp = stamp
        plan = _read_plan(self.path) if stamp is not None else {}
        self._point = str(plan.get("point") or "")
        self._hit = int(plan.get("hit") or 1)
        self._seen = 0


def _read_plan(path: Path) -> dict[str, Any]:
    try:
        plan = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return plan if isinstance(plan, dict) else {}


def write_plan(path: Path, point: str, hit: int = 1) -> None:
    """Arm the process whose kill file is ``path`` (an empty ``point`` disarms it)."""
    staging = path.with_suffix(".new")
    staging.write_text(json.dumps({"point": point, "hit": hit}), encoding="utf-8")
    staging.replace(path)


# -- where the points are ---------------------------------------------------------------------


class _Inside(threading.local):
    """The store method the current thread is in (innermost last)."""

    def __init__(self) -> None:
        self.methods: list[str] = []


def _store_classes() -> list[type]:
    from store.api_store import SqlApiStore
    from store.approval_store import SqlApprovalStore
    from store.outbox import SqlOutbox
    from store.replay_guard import SqlReplayGuard
    from store.sql_store import SqlStore

    return [SqlStore, SqlApprovalStore, SqlOutbox, SqlReplayGuard, SqlApiStore]


def _public_methods(cls: type) -> Iterator[str]:
    for name, value in vars(cls).items():
        if not name.startswith("_") and callable(value):
            yield name


def _around(
    plan: KillPlan, label: str, fn: Callable[..., Any], inside: _Inside | None = None
) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        plan.reached(f"{label}:before")
        if inside is not None:
            inside.methods.append(label.split(":", 1)[1])
        try:
            result = fn(*args, **kwargs)
        finally:
            if inside is not None:
                inside.methods.pop()
        plan.reached(f"{label}:after")
        return result

    return wrapped


def _install_store_points(plan: KillPlan, inside: _Inside) -> None:
    for cls in _store_classes():
        for name in list(_public_methods(cls)):
            label = f"store:{cls.__name__}.{name}"
            setattr(cls, name, _around(plan, label, getattr(cls, name), inside))


def _install_commit_points(plan: KillPlan, inside: _Inside) -> None:
    from sqlalchemy import Engine, event

    def on_commit(_connection: Any) -> None:
        if inside.methods:
            plan.reached(f"commit:{inside.methods[-1]}")

    event.listen(Engine, "commit", on_commit)


def _install_tool_points(plan: KillPlan) -> None:
    from agent_runtime.tools import Tool

    call = Tool.call

    def wrapped(self: Tool, arguments: dict[str, Any], idempotency_key: str) -> Any:
        plan.reached(f"tool:{self.name}:before")
        result = call(self, arguments, idempotency_key)
        plan.reached(f"tool:{self.name}:after")
        return result

    Tool.call = wrapped  # type: ignore[method-assign]


def _install_delivery_points(plan: KillPlan) -> None:
    from bot.slack.dispatcher import Dispatcher

    send = Dispatcher._send

    def wrapped(self: Dispatcher, item: Any) -> Any:
        plan.reached(f"slack:{item.notice.kind}:before")
        result = send(self, item)
        plan.reached(f"slack:{item.notice.kind}:after")
        return result

    Dispatcher._send = wrapped  # type: ignore[method-assign]


def install(plan: KillPlan) -> None:
    """Put kill points around the store calls, commits, tool executions and deliveries."""
    inside = _Inside()
    _install_store_points(plan, inside)
    _install_commit_points(plan, inside)
    _install_tool_points(plan)
    _install_delivery_points(plan)


def armed_plan(argv: Sequence[str], environ: dict[str, str]) -> KillPlan | None:
    """The plan to install: only with ``--armed`` first and a kill file named."""
    path = environ.get(KILL_FILE_ENV, "")
    if not argv or argv[0] != ARMED_FLAG or not path:
        return None
    return KillPlan(Path(path))


def main(argv: Sequence[str]) -> int:
    """``signoff ARGS`` (after ``--armed``, which this consumes), kill points installed if
    armed."""
    plan = armed_plan(argv, dict(os.environ))
    if plan is not None:
        install(plan)
    if argv and argv[0] == ARMED_FLAG:
        argv = argv[1:]
    from bot.cli.main import main as signoff

    return signoff(list(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
