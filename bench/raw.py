"""The physical limit of checkpointing: one INSERT + COMMIT per step, sequential.

Each step writes the minimal row a durable checkpoint needs -- run key, position and
the step's output as JSON text (``'null'`` for the trivial steps measured here) --
into a table of shape::

    raw_steps(run_id UUID, position INTEGER, output TEXT, PRIMARY KEY (run_id, position))

and commits it durably before the next step starts.  Nothing an engine could do per
step on the same database can be faster than this, so an engine's seconds per step
divided by these numbers is its overhead factor.

The run key has the engine's type: native ``uuid`` on PostgreSQL (``key="text"``
gives the UUID's text form instead) and 32 hex digits on SQLite, as Signoff's
``runs.id`` / ``steps.run_id`` columns store it.

All functions clean up after themselves: PostgreSQL work happens in a fresh schema
that is dropped afterwards; SQLite files created by the function are removed.
Timings exclude connection set-up, DDL and a few untimed warm-up inserts.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any, Literal

import psycopg
from psycopg import sql

from bench._common import create_schema, default_dsn, drop_schema, fresh_name

TABLE = "raw_steps"
OUTPUT = "null"  # JSON text of a trivial step's output
WARMUP_STEPS = 5

Driver = Literal["libpq", "psycopg"]
"""How the PostgreSQL raw runs send their statements: ``libpq`` prepares each once and runs
it with libpq's own call (the least client work a Python program can do per statement, and
how the engine sends its journal entries); ``psycopg`` through ``Connection.execute``."""

KeyType = Literal["uuid", "text"]
"""How the PostgreSQL raw table stores its run key: native ``uuid`` (as the engine) or text."""

_SQLITE_DDL = (
    "CREATE TABLE IF NOT EXISTS raw_steps ("
    "run_id TEXT NOT NULL, position INTEGER NOT NULL, output TEXT NOT NULL, "
    "PRIMARY KEY (run_id, position))"
)
_SQLITE_INSERT = "INSERT INTO raw_steps (run_id, position, output) VALUES (?, ?, ?)"


def _pg_ddl(schema: str, key: KeyType) -> sql.Composed:
    return sql.SQL(
        "CREATE TABLE {}.{} ("
        "run_id {} NOT NULL, position INTEGER NOT NULL, output TEXT NOT NULL, "
        "PRIMARY KEY (run_id, position))"
    ).format(sql.Identifier(schema), sql.Identifier(TABLE), sql.SQL(key.upper()))


def _pg_key(key: KeyType) -> uuid.UUID | str:
    """A fresh run key in the form the table of type ``key`` takes."""
    value = uuid.uuid4()
    return value if key == "uuid" else str(value)


def _pg_insert(schema: str) -> sql.Composed:
    return sql.SQL("INSERT INTO {}.{} (run_id, position, output) VALUES (%s, %s, %s)").format(
        sql.Identifier(schema), sql.Identifier(TABLE)
    )


def _check_steps(steps: int) -> None:
    if steps < 1:
        raise ValueError("steps must be >= 1")


# --------------------------------------------------------------------------- SQLite


def create_raw_sqlite_table(path: str) -> None:
    """Create the raw table in the SQLite database at ``path`` once, ahead of the runs.

    ``raw_sqlite_step_seconds`` then neither creates nor drops it: no schema change per
    run that every other connection to the same file would have to reload.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(_SQLITE_DDL)
    finally:
        conn.close()


def raw_sqlite_step_seconds(path: str, steps: int) -> float:
    """Seconds per step for ``steps`` sequential INSERT + COMMIT into SQLite at ``path``.

    WAL journal, ``synchronous=FULL`` (every commit fsyncs the WAL), explicit
    ``BEGIN`` / ``INSERT`` / ``COMMIT`` per step.  If ``path`` did not exist it is
    removed afterwards (with its ``-wal``/``-shm`` files); otherwise only the
    ``raw_steps`` table is dropped, and only if this call created it.
    """
    _check_steps(steps)
    created_file = not os.path.exists(path)
    conn = sqlite3.connect(path, isolation_level=None)  # we issue BEGIN/COMMIT ourselves
    created_table = False
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        created_table = (
            conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'raw_steps'"
            ).fetchone()
            is None
        )
        conn.execute(_SQLITE_DDL)

        def one_run(run_id: str, n: int) -> float:
            start = time.perf_counter()
            for position in range(n):
                conn.execute("BEGIN")
                conn.execute(_SQLITE_INSERT, (run_id, position, OUTPUT))
                conn.execute("COMMIT")
            return time.perf_counter() - start

        one_run(uuid.uuid4().hex, WARMUP_STEPS)
        return one_run(uuid.uuid4().hex, steps) / steps
    finally:
        if created_table and not created_file:
            conn.execute("DROP TABLE IF EXISTS raw_steps")
        conn.close()
        if created_file:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path + suffix)


# ----------------------------------------------------------------------- PostgreSQL


def raw_pg_step_seconds(dsn: str, steps: int, key: KeyType = "uuid") -> float:
    """Seconds per step for ``steps`` sequential INSERT + COMMIT into PostgreSQL.

    One psycopg 3 connection, autocommit off (each INSERT opens a transaction that
    ``commit()`` ends), server defaults for durability (``synchronous_commit``).
    The table lives in a fresh schema that is dropped afterwards.
    """
    _check_steps(steps)
    schema = fresh_name("bench_raw")
    create_schema(dsn, schema)
    try:
        with psycopg.connect(dsn, autocommit=False) as conn:
            conn.execute(_pg_ddl(schema, key))
            conn.commit()
            insert = _pg_insert(schema)

            def one_run(run_id: uuid.UUID | str, n: int) -> float:
                start = time.perf_counter()
                with conn.cursor() as cur:
                    for position in range(n):
                        cur.execute(insert, (run_id, position, OUTPUT))
                        conn.commit()
                return time.perf_counter() - start

            one_run(_pg_key(key), WARMUP_STEPS)
            return one_run(_pg_key(key), steps) / steps
    finally:
        drop_schema(dsn, schema)


def raw_pg_concurrent_steps_per_second(
    dsn: str,
    connections: int = 8,
    steps_each: int = 50,
    key: KeyType = "uuid",
    output: str = OUTPUT,
    autocommit: bool = False,
    driver: Driver = "psycopg",
) -> float:
    """Total steps per second when ``connections`` threads, each with its own
    connection and its own run key, do ``steps_each`` INSERT + COMMIT each (with
    ``autocommit``: each INSERT alone, one round trip) of ``output`` into the same
    table at once.  Wall time runs from a common start barrier to the last thread's
    last commit; connection set-up and warm-up are excluded.  With ``driver="libpq"``
    (autocommit only) each INSERT is prepared once and run with libpq's own call.
    """
    if connections < 1:
        raise ValueError("connections must be >= 1")
    if driver == "libpq" and not autocommit:
        raise ValueError("libpq statements are sent in autocommit mode")
    _check_steps(steps_each)
    schema = fresh_name("bench_raw")
    create_schema(dsn, schema)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(_pg_ddl(schema, key))
        insert = _pg_insert(schema)
        barrier = threading.Barrier(connections + 1)
        errors: list[BaseException] = []
        finished: list[float] = []
        lock = threading.Lock()

        def worker() -> None:
            try:
                with psycopg.connect(dsn, autocommit=autocommit) as wconn, wconn.cursor() as cur:
                    if driver == "libpq":
                        prepared = LibpqStatements(wconn)
                        text = insert.as_string(wconn).replace("%s", "?")

                        def write(params: tuple[Any, ...]) -> None:
                            prepared.execute(text, params)
                    else:

                        def write(params: tuple[Any, ...]) -> None:
                            cur.execute(insert, params)
                            wconn.commit()

                    for position in range(WARMUP_STEPS):
                        write((_pg_key(key), position, output))
                    run_id = _pg_key(key)
                    barrier.wait()
                    for position in range(steps_each):
                        write((run_id, position, output))
                    done = time.perf_counter()
                with lock:
                    finished.append(done)
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(connections)]
        for t in threads:
            t.start()
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()  # a broken barrier means a worker failed: reported below
        start = time.perf_counter()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError(f"{len(errors)} worker(s) failed") from errors[0]
        return connections * steps_each / (max(finished) - start)
    finally:
        drop_schema(dsn, schema)


RowBytesMethod = Literal["total_relation_size", "column_size"]


def raw_row_bytes_pg(
    dsn: str,
    rows: int = 10_000,
    method: RowBytesMethod = "total_relation_size",
    steps_per_run: int = 20,
    key: KeyType = "uuid",
) -> float:
    """Average bytes per row of the raw checkpoint table holding ``rows`` rows
    (``steps_per_run`` positions per run key, run keys of type ``key``, output ``'null'``).

    ``method="total_relation_size"`` (default): ``pg_total_relation_size(table) / rows``
    -- everything the table costs on disk: heap pages (tuple headers, line pointers,
    page headers, free space), the primary-key B-tree, TOAST and other forks.  This
    is the number to compare with an engine's journal bytes per step measured the
    same way.  Page granularity is 8 kB, so keep ``rows`` large.

    ``method="column_size"``: ``avg(pg_column_size(t.*))`` -- the row value alone
    (data plus its ~24-byte tuple header), without line pointer, page or index
    overhead.

    The table lives in a fresh schema that is dropped afterwards.
    """
    if rows < 1 or steps_per_run < 1:
        raise ValueError("rows and steps_per_run must be >= 1")
    schema = fresh_name("bench_raw")
    create_schema(dsn, schema)
    try:
        with psycopg.connect(dsn, autocommit=False) as conn:
            conn.execute(_pg_ddl(schema, key))
            runs = (rows + steps_per_run - 1) // steps_per_run
            run_ids = [_pg_key(key) for _ in range(runs)]
            with conn.cursor() as cur:
                cur.executemany(
                    _pg_insert(schema),
                    [(run_ids[i // steps_per_run], i % steps_per_run, OUTPUT) for i in range(rows)],
                )
            conn.commit()
            table = sql.Identifier(schema, TABLE)
            if method == "total_relation_size":
                query = sql.SQL("SELECT pg_total_relation_size({}::regclass)::float8 / %s").format(
                    sql.Literal(f"{schema}.{TABLE}")
                )
                row = conn.execute(query, (rows,)).fetchone()
            elif method == "column_size":
                query = sql.SQL("SELECT avg(pg_column_size(t.*))::float8 FROM {} AS t").format(
                    table
                )
                row = conn.execute(query).fetchone()
            else:
                raise ValueError(f"unknown method {method!r}")
            assert row is not None
            return float(row[0])
    finally:
        drop_schema(dsn, schema)


def main() -> None:
    import tempfile

    dsn = default_dsn()
    with tempfile.TemporaryDirectory(prefix="signoff-bench-") as tmp:
        for n in (20, 200):
            s = raw_sqlite_step_seconds(os.path.join(tmp, f"raw-{n}.sqlite"), n)
            print(f"raw sqlite      N={n:<4} {s * 1e3:8.3f} ms/step")
    for n in (20, 200):
        s = raw_pg_step_seconds(dsn, n)
        print(f"raw postgres    N={n:<4} {s * 1e3:8.3f} ms/step")
    print(f"raw postgres 8 conns x 50: {raw_pg_concurrent_steps_per_second(dsn):8.0f} steps/s")
    print(f"raw row bytes (pg_total_relation_size / rows): {raw_row_bytes_pg(dsn):8.1f}")
    print(
        f"raw row bytes (avg pg_column_size(row)):       "
        f"{raw_row_bytes_pg(dsn, method='column_size'):8.1f}"
    )


if __name__ == "__main__":
    main()


# ------------------------------------------------------- whole runs, on open connections

_RUN_TABLES = (
    "CREATE TABLE IF NOT EXISTS raw_runs (id {key} PRIMARY KEY, status TEXT NOT NULL, output TEXT)",
    "CREATE TABLE IF NOT EXISTS raw_run_steps (run_id {key} NOT NULL, position INTEGER NOT NULL,"
    " output TEXT NOT NULL, PRIMARY KEY (run_id, position))",
)


class RawRuns:
    """Whole runs written the least a durable engine could: one row for the run, one per
    step (its JSON output), one update at the end, each committed before the next.

    ``run_step_seconds(outputs, transactions=False)`` sends each statement on its own in
    autocommit mode (one round trip, as the engine's single statements);
    ``transactions=True`` wraps each in BEGIN/COMMIT (three round trips on PostgreSQL);
    ``busy`` adds client work before each step's statement. The connection stays open
    between runs, as the engine's do.
    """

    def __init__(self, execute: Any, begin: Any, commit: Any, key: Any) -> None:
        self._execute, self._begin, self._commit, self._key = execute, begin, commit, key

    def run_step_seconds(
        self, outputs: list[str], *, transactions: bool = False, busy: float = 0.0
    ) -> float:
        """Seconds per step of one run writing ``outputs``, from its row to its end; with
        ``busy``, the client first keeps the processor busy that many seconds at every step
        (as an engine's own work between its statements would)."""
        run_id = self._key()
        start = time.perf_counter()
        self._statement("INSERT INTO raw_runs VALUES (?, 'running', NULL)", (run_id,), transactions)
        for position, output in enumerate(outputs):
            if busy:
                _spin(busy)
            self._statement(
                "INSERT INTO raw_run_steps VALUES (?, ?, ?)",
                (run_id, position, output),
                transactions,
            )
        self._statement(
            "UPDATE raw_runs SET status = 'completed', output = '{}' WHERE id = ?",
            (run_id,),
            transactions,
        )
        return (time.perf_counter() - start) / len(outputs)

    def _statement(self, text: str, params: tuple[Any, ...], transactions: bool) -> None:
        if transactions:
            self._begin()
        self._execute(text, params)
        if transactions:
            self._commit()


def _spin(seconds: float) -> None:
    """Keep the processor busy for ``seconds`` (not asleep: the work an engine does)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


@contextlib.contextmanager
def raw_sqlite_runs(path: str) -> Iterator[RawRuns]:
    """``RawRuns`` on the SQLite database at ``path`` (WAL, ``synchronous=FULL``), whose
    tables are created if needed and left in place."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        for ddl in _RUN_TABLES:
            conn.execute(ddl.format(key="TEXT"))
        yield RawRuns(
            conn.execute,
            lambda: conn.execute("BEGIN IMMEDIATE"),
            lambda: conn.execute("COMMIT"),
            lambda: uuid.uuid4().hex,
        )
    finally:
        conn.close()


@contextlib.contextmanager
def raw_pg_runs(
    dsn: str, driver: Driver = "libpq", *, schema: str | None = None
) -> Iterator[RawRuns]:
    """``RawRuns`` on PostgreSQL (native ``uuid`` keys), in a fresh schema (named ``schema``
    if given) dropped afterwards."""
    schema = schema or fresh_name("bench_raw")
    create_schema(dsn, schema)
    try:
        with psycopg.connect(dsn, autocommit=True, options=f"-csearch_path={schema}") as conn:
            for ddl in _RUN_TABLES:
                conn.execute(ddl.format(key="UUID"))
            if driver == "libpq":
                prepared = LibpqStatements(conn)
                yield RawRuns(
                    prepared.execute,
                    lambda: prepared.command(b"BEGIN"),
                    lambda: prepared.command(b"COMMIT"),
                    uuid.uuid4,
                )
                return
            yield RawRuns(
                lambda text, params: conn.execute(text.replace("?", "%s"), params),
                lambda: conn.execute("BEGIN"),
                lambda: conn.execute("COMMIT"),
                uuid.uuid4,
            )
    finally:
        drop_schema(dsn, schema)


class LibpqStatements:
    """Statements with ``?`` placeholders, each prepared by name on first use on one
    connection and then run with ``PQexecPrepared``, parameters as their text."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._pgconn = conn.pgconn
        self._names: dict[str, bytes] = {}

    def execute(self, text: str, params: tuple[Any, ...]) -> Any:
        """Run ``text`` with ``params`` (prepared the first time); return libpq's result."""
        name = self._names.get(text)
        if name is None:
            name = f"raw_{len(self._names)}".encode()
            numbered = text.split("?")
            sql = numbered[0] + "".join(f"${n}{rest}" for n, rest in enumerate(numbered[1:], 1))
            _succeeded(self._pgconn.prepare(name, sql.encode(), None))
            self._names[text] = name
        sent = [str(p).encode() for p in params]
        return _succeeded(self._pgconn.exec_prepared(name, sent))

    def command(self, sql: bytes) -> None:
        """Run a statement without parameters (BEGIN, COMMIT)."""
        _succeeded(self._pgconn.exec_(sql))


def _succeeded(result: Any) -> Any:
    if result.status not in (psycopg.pq.ExecStatus.COMMAND_OK, psycopg.pq.ExecStatus.TUPLES_OK):
        raise RuntimeError((result.error_message or b"").decode(errors="replace"))
    return result
