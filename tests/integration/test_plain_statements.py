"""The journal's append with plainly encoded parameters (on SQLite through the cursor, on
PostgreSQL through libpq's own call): what it writes, and how it fails; and on PostgreSQL
the claim and the journal load through libpq: what they read."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from sqlalchemy import Boolean, text
from sqlalchemy import exc as sa_exc

from agent_runtime import (
    ErrorInfo,
    Lease,
    RunContext,
    RunId,
    RunStatus,
    Runtime,
    StepKind,
    StepRecord,
    StoreUnavailable,
    WorkerOptions,
    Workflows,
    new_run_id,
)
from agent_runtime.executor import AFTER_AN_OUTAGE
from store import SqlStore
from store.driver import DriverConnections, Prepared, Statement
from store.errors import translated
from store.libpq_statements import LibpqPrepared, numbered
from store.models import steps
from store.plain_statements import plain_encoder, plain_statement
from store.run_sql import (
    ENTRY,
    JOURNAL_QUERY,
    claimed_columns,
    fenced_append_params,
    fenced_append_statement,
    run_from_row,
)
from tests.integration import wait_until


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_store(request: pytest.FixtureRequest) -> SqlStore:
    """A migrated store on SQLite, then on PostgreSQL."""
    store: SqlStore = request.getfixturevalue(f"{request.param}_store".replace("postgres", "pg"))
    return store


def _plain(store: SqlStore, name: str) -> Statement:
    """The journal append as the store runs it on its database."""
    return plain_statement(store._append, store.engine.dialect, name)


NOW = datetime(2026, 12, 3, 4, 5, 6, 789012, tzinfo=UTC)
EAST = timezone(timedelta(hours=5, minutes=30))


def _lease(store: SqlStore) -> Lease:
    run = store.create_run(new_run_id(), "t", {"n": 1}, NOW)
    lease = store.adopt_run(run.id, "w", now=NOW, expires_at=NOW + timedelta(hours=1))
    assert lease is not None
    return lease


def _entry(position: int, **changes: Any) -> StepRecord:
    fields: dict[str, Any] = {
        "position": position,
        "kind": StepKind.STEP,
        "name": "envoyer l'e-mail « ✓ » 'quoted' %s %(x)s $1",
        "input_hash": "0123456789abcdef",
        "output": {"zeta": [1, 2.5, None, True], "alpha": 'naïve \u2028 "q" \\ \t', "n": {}},
        "attempts": 3,
        "started_at": NOW.astimezone(EAST),
        "finished_at": NOW + timedelta(microseconds=1),
    }
    return StepRecord(**(fields | changes))


ENTRIES = {
    "output": _entry(0),
    "error": _entry(
        0,
        output=None,
        error=ErrorInfo(type="ValueError", message="bad « input »", details={"at": 3}),
    ),
    "string output": _entry(0, output="just text"),
    "no output": _entry(0, output=None),
    "whole-second times": _entry(0, started_at=NOW.replace(microsecond=0)),
}


def _columns(store: SqlStore, query: str, lease: Lease) -> tuple[Any, ...]:
    """The run's row ``query`` selects (by ``:run``) as the database holds it (SQLite's
    timestamps as their text), its ``output`` and ``error`` JSON documents parsed (one text
    may space them differently from the other)."""
    with store.engine.connect() as conn:
        row = conn.execute(text(query), {"run": lease.run_id}).one()._asdict()
    if store.engine.dialect.name == "sqlite":  # PostgreSQL's driver parses jsonb itself
        for name in ("output", "error"):
            row[name] = None if row[name] is None else json.loads(row[name])
    return tuple(row.values())


def _stored(store: SqlStore, lease: Lease) -> tuple[Any, ...]:
    """The entry's columns."""
    return _columns(
        store,
        "SELECT kind, name, input_hash, output, output IS NULL AS no_output, error, attempts, "
        "started_at, finished_at FROM steps WHERE run_id = :run",
        lease,
    )


@pytest.mark.parametrize("name", list(ENTRIES))
def test_an_entry_appended_plainly_is_stored_as_sqlalchemy_stores_it(
    sql_store: SqlStore, name: str
) -> None:
    """The same entry, appended with plain parameters and with SQLAlchemy's type processing
    on a cursor, is stored alike, column for column, and reads back as it was written."""
    entry = ENTRIES[name]
    through_sqlalchemy = Prepared(sql_store._append, sql_store.engine.dialect)
    connections = DriverConnections(sql_store.engine, most=1)
    leases = _lease(sql_store), _lease(sql_store)
    ways: tuple[Statement, Statement] = (through_sqlalchemy, _plain(sql_store, "test_append"))
    for lease, prepared in zip(leases, ways, strict=True):
        outcome = connections.execute(prepared, fenced_append_params(lease, entry))
        assert outcome.rowcount == 1
    assert _stored(sql_store, leases[1]) == _stored(sql_store, leases[0])
    assert sql_store.load_journal(leases[1].run_id) == [entry]
    connections.close()


ENDS: dict[str, dict[str, Any]] = {
    "completed": {"end_status": "completed", "end_output": {"answer": "« ✓ »", "n": [1.5]}},
    "failed": {"end_status": "failed", "end_error": {"type": "E", "message": "x", "details": {}}},
    "completed with no output": {"end_status": "completed", "end_output": None},
}


def _run_row(store: SqlStore, lease: Lease) -> tuple[Any, ...]:
    """The run's columns an end writes."""
    return _columns(
        store,
        "SELECT status, output, output IS NULL AS no_output, error, error IS NULL AS no_error, "
        "lease_owner, due_at, wait_key, updated_at FROM runs WHERE id = :run",
        lease,
    )


@pytest.mark.parametrize("name", list(ENDS))
def test_a_run_ended_plainly_is_stored_as_sqlalchemy_stores_it(
    sql_store: SqlStore, name: str
) -> None:
    """A run's end, written with plain parameters and with SQLAlchemy's type processing,
    is stored alike, column for column."""
    values: dict[str, Any] = {"end_output": None, "end_error": None}
    values["end_at"] = NOW.astimezone(EAST)
    values |= ENDS[name]
    connections = DriverConnections(sql_store.engine, most=1)
    leases = _lease(sql_store), _lease(sql_store)
    ways: tuple[Statement, Statement] = (
        Prepared(sql_store._end, sql_store.engine.dialect),
        plain_statement(sql_store._end, sql_store.engine.dialect, "test_end"),
    )
    for lease, prepared in zip(leases, ways, strict=True):
        held = {"held_run": lease.run_id, "held_fence": lease.fence}
        assert connections.execute(prepared, values | held).rowcount == 1
    assert _run_row(sql_store, leases[1]) == _run_row(sql_store, leases[0])
    connections.close()


def test_an_append_under_a_lost_lease_writes_nothing(sql_store: SqlStore) -> None:
    """With plain parameters the fence still holds: an append under an older fence changes
    no row."""
    lease = _lease(sql_store)
    stale = Lease(lease.run_id, lease.owner, lease.fence - 1)
    connections = DriverConnections(sql_store.engine, most=1)
    prepared = _plain(sql_store, "t_fence")
    assert connections.execute(prepared, fenced_append_params(stale, _entry(0))).rowcount == 0
    assert connections.execute(prepared, fenced_append_params(lease, _entry(0))).rowcount == 1
    connections.close()


@pytest.mark.postgres
def test_a_statement_deallocated_on_its_connection_is_prepared_again(pg_store: SqlStore) -> None:
    """After ``DEALLOCATE ALL`` on the connection it was prepared on, the next append
    prepares it again and is written."""
    lease = _lease(pg_store)
    connections = DriverConnections(pg_store.engine, most=1)  # one connection: always the same
    prepared = LibpqPrepared(fenced_append_statement(True), pg_store.engine.dialect, "t_again")
    connections.execute(prepared, fenced_append_params(lease, _entry(0)))
    connections.execute(Prepared(text("DEALLOCATE ALL"), pg_store.engine.dialect), {})
    assert connections.execute(prepared, fenced_append_params(lease, _entry(1))).rowcount == 1
    assert [e.position for e in pg_store.load_journal(lease.run_id)] == [0, 1]
    connections.close()


@pytest.mark.postgres
def test_a_name_already_prepared_on_the_connection_is_the_store_unavailable_with_a_hint(
    pg_store: SqlStore,
) -> None:
    """A statement's name found prepared already on a connection that never prepared it
    (what a pooler in transaction mode hands over) fails as the store being unavailable,
    naming the URL parameter for such a pooler, not as an error of the run's own."""
    lease = _lease(pg_store)
    dialect = pg_store.engine.dialect
    connections = DriverConnections(pg_store.engine, most=1)  # one connection: always the same
    connections.execute(Prepared(text("PREPARE t_taken AS SELECT 1"), dialect), {})
    prepared = LibpqPrepared(fenced_append_statement(True), dialect, "t_taken")
    with pytest.raises(StoreUnavailable, match="pooling=transaction"), translated():
        connections.execute(prepared, fenced_append_params(lease, _entry(0)))
    connections.close()
    assert pg_store.load_journal(lease.run_id) == []


@contextmanager
def _append_cut(store: SqlStore, run_id: RunId) -> Iterator[None]:
    """Hold the run's row locked while the body runs; then terminate the session of the
    journal append that has come to wait for the row, and unlock it."""
    with store.engine.connect() as holder:
        holder.execute(text("SELECT 1 FROM runs WHERE id = :id FOR UPDATE"), {"id": run_id})
        yield
        waiting = text(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'INSERT INTO steps%' AND wait_event_type = 'Lock'"
        )
        pids: list[int] = []

        def blocked() -> bool:
            with store.engine.connect() as conn:
                pids[:] = list(conn.execute(waiting).scalars())
            return len(pids) == 1

        wait_until(blocked, timeout=30, what="the append waiting for the run's row")
        with store.engine.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pids[0]})
        holder.rollback()


@pytest.mark.postgres
def test_an_append_whose_session_is_terminated_leaves_the_store_unavailable(
    pg_store: SqlStore,
) -> None:
    """An append whose session is terminated while it waits fails as the store being
    unavailable, and the next append runs on a new connection."""
    lease = _lease(pg_store)
    failed: list[BaseException] = []

    def append() -> None:
        try:
            pg_store.append_step(lease, _entry(0))
        except BaseException as exc:
            failed.append(exc)

    appending = threading.Thread(target=append)
    with _append_cut(pg_store, lease.run_id):
        appending.start()
    appending.join(30)
    assert len(failed) == 1, failed
    assert isinstance(failed[0], StoreUnavailable), failed
    pg_store.append_step(lease, _entry(0))
    assert [e.position for e in pg_store.load_journal(lease.run_id)] == [0]


@pytest.mark.postgres
def test_a_run_whose_append_is_cut_is_given_back_for_a_retry_not_held_for_its_lease(
    pg_store: SqlStore,
) -> None:
    """A run whose journal append fails because its session was terminated is released,
    due moments later rather than when its hour-long lease ends, and another worker then
    resumes and completes it."""
    claimed, locked = threading.Event(), threading.Event()

    def one() -> str:
        claimed.set()
        assert locked.wait(30)
        return "done"

    workflows = Workflows()

    @workflows.register("cut")
    def cut(ctx: RunContext, _: Any) -> str:
        return ctx.step(one, name="one")

    runtime = Runtime(pg_store, workflows)
    hour = timedelta(hours=1)
    run = runtime.start("cut")
    cut_at = datetime.now(UTC)
    working = threading.Thread(
        target=runtime.worker(WorkerOptions(owner="cut", lease_ttl=hour)).run_once
    )
    working.start()
    assert claimed.wait(30)
    with _append_cut(pg_store, run.id):
        locked.set()
    working.join(30)
    given_back = pg_store.get_run(run.id)
    assert given_back.status == RunStatus.PENDING
    assert given_back.lease_owner is None
    assert given_back.due_at is not None
    assert cut_at < given_back.due_at <= datetime.now(UTC) + AFTER_AN_OUTAGE
    other = runtime.worker(WorkerOptions(owner="other", lease_ttl=hour))
    wait_until(other.run_once, timeout=30, what="another worker to resume the run")
    assert pg_store.get_run(run.id).output == "done"


@pytest.mark.postgres
def test_a_unique_violation_comes_out_as_psycopg_raises_it(pg_store: SqlStore) -> None:
    """A second entry at the same position fails with psycopg's ``UniqueViolation``,
    wrapped as SQLAlchemy wraps it, and the connection stays usable."""
    lease = _lease(pg_store)
    connections = DriverConnections(pg_store.engine, most=1)
    prepared = LibpqPrepared(fenced_append_statement(True), pg_store.engine.dialect, "t_twice")
    connections.execute(prepared, fenced_append_params(lease, _entry(0)))
    with pytest.raises(sa_exc.IntegrityError) as raised:
        connections.execute(prepared, fenced_append_params(lease, _entry(0)))
    assert isinstance(getattr(raised.value, "orig", None), psycopg.errors.UniqueViolation)
    assert connections.execute(prepared, fenced_append_params(lease, _entry(1))).rowcount == 1
    connections.close()


def test_a_type_without_a_plain_encoding_is_refused(sql_store: SqlStore) -> None:
    """A parameter of a type the plain encoders do not know is refused when its statement
    is built, not sent with a guess."""
    with pytest.raises(TypeError, match="no plain encoding"):
        plain_encoder(Boolean(), sql_store.engine.dialect)


def test_placeholders_are_numbered_once_per_name() -> None:
    """A name used twice gets one number, and an escaped percent sign is unescaped."""
    sql, names = numbered("SELECT %(a)s, %(b)s, %(a)s, 10 %% 3")
    assert sql == "SELECT $1, $2, $1, 10 % 3"
    assert names == ["a", "b"]


RICH_INPUT = {"zeta": [1, 2.5, None, True], "alpha": 'naïve \u2028 "q" \\ \t « ✓ »', "n": {}}


def _claimed_both_ways(pg_store: SqlStore) -> tuple[list[Any], list[Any]]:
    """One due run claimed by the store's statement through libpq, and another by the same
    statement through ``Prepared`` on a psycopg cursor: each claim's decoded rows."""
    connections = DriverConnections(pg_store.engine, most=1)
    ways: tuple[Statement, Statement] = (
        pg_store._claim,
        Prepared(pg_store._claim_statement, pg_store.engine.dialect, claimed_columns()),
    )
    rows = []
    for way in ways:
        pg_store.create_run(new_run_id(), "t", RICH_INPUT, NOW.astimezone(EAST))
        claim = {"owner": "w « 1 »", "now": NOW + timedelta(seconds=1), "limit": 5}
        claim["expires_at"] = NOW.astimezone(EAST) + timedelta(minutes=1, microseconds=7)
        rows.append(connections.execute(way, claim, fetch=True).rows)
    connections.close()
    return rows[0], rows[1]


@pytest.mark.postgres
def test_a_claim_through_libpq_reads_its_runs_as_a_cursor_does(pg_store: SqlStore) -> None:
    """The claim sent through libpq returns each column as the same statement on a psycopg
    cursor decodes it (ids, JSON input, timestamps, the status it had), and the run it
    returns is the run the database then holds."""
    through_libpq, through_cursor = _claimed_both_ways(pg_store)
    assert len(through_libpq) == len(through_cursor) == 1
    mine, theirs = through_libpq[0]._asdict(), through_cursor[0]._asdict()
    assert mine.keys() == theirs.keys()
    assert {k: v for k, v in mine.items() if k != "id"} == {  # two runs, alike but for it
        k: v for k, v in theirs.items() if k != "id"
    }
    assert mine["input"] == RICH_INPUT
    assert mine["was"] == "pending"
    assert run_from_row(through_libpq[0]) == pg_store.get_run(mine["id"])


@pytest.mark.postgres
def test_a_journal_loaded_through_libpq_reads_as_a_cursor_does(pg_store: SqlStore) -> None:
    """The journal query sent through libpq reads every entry (outputs, errors, times) as
    the same query on a psycopg cursor decodes it, and again after its name was
    deallocated on the connection."""
    lease = _lease(pg_store)
    for position, entry in enumerate(ENTRIES.values()):
        pg_store.append_step(lease, replace(entry, position=position))
    connections = DriverConnections(pg_store.engine, most=1)
    cursor = Prepared(JOURNAL_QUERY, pg_store.engine.dialect, [steps.c[n] for n in ENTRY])
    values = {"run_id": lease.run_id}
    through_cursor = connections.execute(cursor, values, fetch=True).rows
    assert connections.execute(pg_store._journal, values, fetch=True).rows == through_cursor
    connections.execute(Prepared(text("DEALLOCATE ALL"), pg_store.engine.dialect), {})
    assert connections.execute(pg_store._journal, values, fetch=True).rows == through_cursor
    assert len(through_cursor) == len(ENTRIES)
    assert pg_store.load_journal(lease.run_id) == [
        replace(entry, position=position) for position, entry in enumerate(ENTRIES.values())
    ]
    connections.close()
