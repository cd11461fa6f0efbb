"""How fast a started run reaches its first step, and how fast a killed worker's run moves.

Run ``python -m bench.wakeups`` (``--quick`` for fewer repeats).  Real processes: each
``signoff serve --no-http --no-scheduler`` (a serving process with its worker) and
``signoff worker`` runs on a migrated database of its own (PostgreSQL: a fresh schema of
``SIGNOFF_BENCH_PG_URL``, default the local server; SQLite: a temporary file), with the
default lease and poll interval.  It prints:

* start-to-first-step: from the return of ``Runtime.start`` in this process (the run's
  commit; and, beside it, from the call) to the ``started_at`` of the run's first journal
  entry, written by the other process (one host, one clock), p50 and p95, for
  serve+worker and worker alone on PostgreSQL, a worker thread of this very process on
  SQLite (woken by its own commits), and a worker process on SQLite (which only its poll
  wakes: up to ``SIGNOFF_POLL_INTERVAL_SECONDS``).  Beside them, measured in the same run
  and interleaved repeat by repeat, the floor: a raw ``NOTIFY`` to ``LISTEN`` round trip
  between two psycopg connections.
* takeover: SIGKILL a ``signoff worker`` holding a run inside a step; seconds until a
  second, already running worker holds it (the lease then has to lapse: at most the lease
  TTL plus one poll).  Beside it, the floor a PostgreSQL session advisory lock would give:
  SIGKILL a process holding one, seconds until another session gets it; and the
  steady-state price of short leases: one heartbeat (a single UPDATE renewing every
  lease a worker holds, here 4), which a busy worker pays once a second.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from agent_runtime import RunId, Runtime, WorkerOptions
from bench._common import default_dsn
from bench.step_harness import pg_store, sqlite_store
from devkit.demo.workflows import demo_workflows
from store.notify import WakeListener
from store.sql_store import SqlStore

WAIT_S = 60.0
FLOOR_CHANNEL = "bench_wake_floor"
LOCK_KEY = 4242


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _wait(probe: Callable[[], object], what: str, *, every: float = 0.002) -> None:
    deadline = time.monotonic() + WAIT_S
    while not probe():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(every)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


class Process:
    """A ``signoff`` subprocess on one database, with its probes on a port of its own."""

    def __init__(self, store: SqlStore, *args: str) -> None:
        self.port = _free_port()
        self._store = store
        self._listening_before = _listeners(store)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIGNOFF_")}
        env["SIGNOFF_DATABASE_URL"] = store.engine.url.render_as_string(hide_password=False)
        env["SIGNOFF_DEMO"] = "1"  # the demo.* workflows this benchmark starts
        script = Path(sys.executable).with_name("signoff")
        self.process = subprocess.Popen(
            [str(script), *args, "--metrics-port", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def ready(self) -> Process:
        """Wait until it answers ``/readyz`` (and, on PostgreSQL, listens); return it."""
        _wait(lambda: _ready(self.port), "the process to be ready", every=0.05)
        if self._store.engine.dialect.name == "postgresql":
            _wait(
                lambda: _listeners(self._store) > self._listening_before,
                "the process to listen",
                every=0.05,
            )
        return self

    def holds(self, run_id: RunId) -> bool:
        """Whether this process holds the run's lease."""
        owner = self._store.get_run(run_id).lease_owner or ""
        return owner.split(":")[-2:-1] == [str(self.process.pid)]

    def kill(self) -> None:
        """SIGKILL it and reap it."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()


def _listeners(store: SqlStore) -> int:
    if store.engine.dialect.name != "postgresql":
        return 0
    with psycopg.connect(_dsn(store), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'"
            " AND datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def _dsn(store: SqlStore) -> str:
    return store.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def running(process: Process) -> Iterator[Process]:
    """Wait until ``process`` is ready and yield it; SIGKILL it on the way out."""
    try:
        yield process.ready()
    finally:
        process.kill()


# ---------------------------------------------------------------- start to first step


@dataclass(frozen=True, slots=True)
class Timing:
    """One start: ms from calling ``start``, and from its commit, to the first step."""

    total: float
    after_commit: float


def first_step_ms(store: SqlStore) -> Timing:
    """Start a one-step run; return ms from calling ``start`` and from its return (its
    commit) to the first step's ``started_at``."""
    runtime = Runtime(store, demo_workflows())
    called = datetime.now(UTC)
    run = runtime.start("demo.trivial", {"n": 1})
    committed = datetime.now(UTC)
    _wait(lambda: store.get_run(run.id).status.finished, "the run to finish")
    started = store.load_journal(run.id)[0].started_at
    ms = timedelta(milliseconds=1)
    return Timing(total=(started - called) / ms, after_commit=(started - committed) / ms)


class NotifyFloor:
    """A raw ``NOTIFY`` to ``LISTEN`` round trip between two connections."""

    def __init__(self, dsn: str) -> None:
        self._listener = psycopg.connect(dsn, autocommit=True)
        self._sender = psycopg.connect(dsn, autocommit=True)
        self._listener.execute(f"LISTEN {FLOOR_CHANNEL}")

    def once(self) -> Timing:
        """One round trip (sent as a commit is: the whole of it is after the commit)."""
        heard: list[float] = []
        thread = threading.Thread(
            target=lambda: heard.extend(
                time.perf_counter() for _ in self._listener.notifies(timeout=WAIT_S, stop_after=1)
            )
        )
        thread.start()
        time.sleep(0.01)  # let the listener block in its wait before the notification
        sent = time.perf_counter()
        self._sender.execute(f"NOTIFY {FLOOR_CHANNEL}")
        thread.join()
        ms = (heard[0] - sent) * 1000
        return Timing(total=ms, after_commit=ms)

    def close(self) -> None:
        """Close both connections."""
        self._listener.close()
        self._sender.close()


@contextmanager
def in_process_worker(store: SqlStore) -> Iterator[None]:
    """A worker thread of this process, woken by this process's commits."""
    worker = Runtime(store, demo_workflows()).worker(WorkerOptions())
    thread = threading.Thread(target=worker.run, daemon=True)
    with WakeListener(store.engine, worker.wake):
        thread.start()
        try:
            yield
        finally:
            worker.stop()
            thread.join()


def start_latencies(dsn: str, repeats: int, sqlite_repeats: int) -> dict[str, list[Timing]]:
    """Interleave one start per kind, ``repeats`` times (the SQLite process: fewer)."""
    found: dict[str, list[Timing]] = {}
    with ExitStack() as stack:
        serve_db = stack.enter_context(pg_store(dsn))
        worker_db = stack.enter_context(pg_store(dsn))
        local_db = stack.enter_context(sqlite_store())
        file_db = stack.enter_context(sqlite_store())
        stack.enter_context(running(Process(serve_db, "serve", "--no-http", "--no-scheduler")))
        stack.enter_context(running(Process(worker_db, "worker")))
        stack.enter_context(running(Process(file_db, "worker")))
        stack.enter_context(in_process_worker(local_db))
        floor = NotifyFloor(_dsn(serve_db))
        stack.callback(floor.close)
        kinds: dict[str, Callable[[], Timing]] = {
            "PostgreSQL NOTIFY -> LISTEN (floor)": floor.once,
            "PostgreSQL, signoff serve (with worker)": lambda: first_step_ms(serve_db),
            "PostgreSQL, signoff worker": lambda: first_step_ms(worker_db),
            "SQLite, worker in the starting process": lambda: first_step_ms(local_db),
        }
        for kind, measure in kinds.items():
            measure()  # warm-up, untimed
            found[kind] = []
        for index in range(repeats):
            for kind, measure in kinds.items():
                found[kind].append(measure())
            if index < sqlite_repeats:
                found.setdefault("SQLite, signoff worker in another process", []).append(
                    first_step_ms(file_db)
                )
    return found


# -------------------------------------------------------------------------- takeover


def takeover_s(store: SqlStore) -> float:
    """SIGKILL a worker inside a step; return seconds until a running worker holds the run."""
    runtime = Runtime(store, demo_workflows())
    with (
        tempfile.TemporaryDirectory(prefix="signoff-bench-") as tmp,
        running(Process(store, "worker", "--concurrency", "1")) as victim,
    ):
        run = runtime.start(
            "demo.steps", {"n": 1, "delay_ms": 600_000, "path": os.path.join(tmp, "out.txt")}
        )
        _wait(lambda: victim.holds(run.id), "the victim to hold the run", every=0.01)
        with running(Process(store, "worker")) as survivor:
            victim.kill()
            killed = time.monotonic()
            _wait(lambda: survivor.holds(run.id), "the takeover", every=0.01)
            took = time.monotonic() - killed
        runtime.cancel(run.id)
    return took


def advisory_release_s(dsn: str) -> float:
    """SIGKILL a process holding a session advisory lock; seconds until another gets it."""
    code = (
        "import psycopg, sys, time\n"
        "c = psycopg.connect(sys.argv[1], autocommit=True)\n"
        f"c.execute('SELECT pg_advisory_lock({LOCK_KEY})')\n"
        "print('held', flush=True)\n"
        "time.sleep(600)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, dsn], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with psycopg.connect(dsn, autocommit=True) as conn:
            os.kill(holder.pid, signal.SIGKILL)
            killed = time.monotonic()
            conn.execute(f"SELECT pg_advisory_lock({LOCK_KEY})")
            took = time.monotonic() - killed
            conn.execute(f"SELECT pg_advisory_unlock({LOCK_KEY})")
    finally:
        holder.kill()
        holder.wait()
    return took


def heartbeat_ms(store: SqlStore, held: int = 4, repeats: int = 200) -> float:
    """The median ms of one heartbeat of a worker holding ``held`` runs (one UPDATE)."""
    runtime = Runtime(store, demo_workflows())
    runs = [runtime.start("demo.trivial", {"n": 1}) for _ in range(held)]
    now = datetime.now(UTC)
    leases = [
        lease
        for _, lease in store.claim_runs(
            "bench", limit=held, now=now, expires_at=now + timedelta(days=1)
        )
    ]
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        store.renew_leases(leases, datetime.now(UTC) + timedelta(seconds=3))
        times.append((time.perf_counter() - began) * 1000)
    for run in runs:
        runtime.cancel(run.id)
    return statistics.median(times)


def takeovers(dsn: str, repeats: int) -> tuple[dict[str, list[float]], float]:
    """Takeover seconds per database and the advisory-lock floor, interleaved; and the
    median ms of one PostgreSQL heartbeat."""
    found: dict[str, list[float]] = {}
    with pg_store(dsn) as pg, sqlite_store() as lite:
        kinds: dict[str, Callable[[], float]] = {
            "PostgreSQL, lease (default TTL)": lambda: takeover_s(pg),
            "SQLite, lease (default TTL)": lambda: takeover_s(lite),
            "PostgreSQL session advisory lock (floor)": lambda: advisory_release_s(dsn),
        }
        for _ in range(repeats):
            for kind, measure in kinds.items():
                found.setdefault(kind, []).append(measure())
        return found, heartbeat_ms(pg)


# ---------------------------------------------------------------------------- tables


def start_table(found: dict[str, list[Timing]]) -> str:
    """The start-to-first-step table."""
    rows = [
        "start to first step (ms)                  from commit       from start()   runs",
        "                                            p50      p95      p50      p95",
        *(
            f"{kind:<42} {_p(v, 'after_commit', 0.5):8.1f} {_p(v, 'after_commit', 0.95):8.1f}"
            f" {_p(v, 'total', 0.5):8.1f} {_p(v, 'total', 0.95):8.1f} {len(v):6d}"
            for kind, v in found.items()
        ),
    ]
    return "\n".join(rows) + "\n"


def _p(timings: list[Timing], field: str, share: float) -> float:
    return _percentile([getattr(t, field) for t in timings], share)


def takeover_table(found: dict[str, list[float]], heartbeat: float) -> str:
    """The takeover table."""
    rows = [
        "SIGKILL to takeover (s)                    p50      max   runs",
        *(
            f"{kind:<42} {_percentile(v, 0.5):8.2f} {max(v):8.2f} {len(v):6d}"
            for kind, v in found.items()
        ),
        f"a heartbeat renewing 4 leases on PostgreSQL: {heartbeat:.2f} ms, once a second",
    ]
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Run every measurement and print the tables."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.wakeups", description="Wake-up latency and takeover time."
    )
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args(argv)
    dsn = default_dsn()
    repeats, sqlite_repeats, kills = (10, 4, 2) if args.quick else (40, 10, 5)
    print(start_table(start_latencies(dsn, repeats, sqlite_repeats)), flush=True)
    print(takeover_table(*takeovers(dsn, kills)), flush=True)


if __name__ == "__main__":
    main()
