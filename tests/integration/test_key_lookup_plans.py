"""A statement that finds one row by its key reads it through the key's index, even when
PostgreSQL's statistics were taken before a backlog of that row's status built up.

The database here is left as a busy one can be between two autovacuum analyses: its
statistics were taken when every run had finished, every notice was sent and every
approval decided, and since then thousands of runs wait, run, failed or are pending,
thousands of notices are pending (Slack was down) and thousands of approvals pending. An
index leading with the status then looks as cheap as the key's; a statement read through
it would read the whole backlog to find its one row (``store.row_checks``). Each store
operation below is carried out, every statement it sent is explained with its own
parameters, and no plan may read through a status index.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from agent_runtime import Lease, RunId, StepRecord
from agent_runtime.notices import Notice, QueuedNotice
from agent_runtime.records import StepKind
from bench._common import scratch_database
from bench.decisions import pg_url
from bench.lists import explain, plan_nodes
from store import SqlStore, open_store
from store.approval_store import PENDING_OF_RUN
from store.decision_pipeline import WRITTEN, DecisionStatements
from store.driver import Prepared
from store.home_tabs import HOME_REFRESH, queue_refreshes
from store.libpq_statements import LibpqPrepared
from store.outbox import SqlOutbox

pytestmark = pytest.mark.postgres

BACKLOG = 3_000
"""Rows of each busy status added after the statistics were taken."""
NOW = datetime(2026, 6, 1, tzinfo=UTC)
STATUS_INDEXES = (
    "ix_outbox_status_next_at",
    "ix_runs_status_created_at_id",
    "ix_approvals_status_requested_at_position_id",
)

Sent = list[tuple[str, Any]]

SEED = f"""
ALTER TABLE runs SET (autovacuum_enabled = off);
ALTER TABLE outbox SET (autovacuum_enabled = off);
ALTER TABLE approvals SET (autovacuum_enabled = off);
INSERT INTO runs (id, workflow, status, input, created_at, updated_at, fence)
  SELECT gen_random_uuid(), 'wf', 'succeeded', '{{}}', now(), now(), 0
  FROM generate_series(1, 500);
INSERT INTO outbox (key, kind, data, created_at, status, attempts, next_at, fence, team_id,
  enterprise_id)
  SELECT 'sent:' || g, 'run.reply', '{{}}', now(), 'sent', 1, now(), 1, 'T1', ''
  FROM generate_series(1, 500) g;
INSERT INTO approvals (id, run_id, position, kind, tool, args, args_hash, fingerprint, policy,
  requester, requested_at, deadline, reason_asked, status, votes, escalated, version)
  SELECT 'decided' || g, (SELECT id FROM runs LIMIT 1), g, 'tool_call', 'refund', '{{}}',
    'h', 'f', '{{}}', '{{}}', now(), now(), '', 'approved', '[]', false, 1
  FROM generate_series(1, 500) g;
ANALYZE runs; ANALYZE outbox; ANALYZE approvals;
INSERT INTO runs (id, workflow, status, input, created_at, updated_at, due_at, wait_key,
  fence)
  SELECT gen_random_uuid(), 'wf', s, '{{}}', now(), now(), now() + interval '1 hour',
    CASE WHEN s = 'waiting' THEN 'approval:1' END, 1
  FROM unnest(ARRAY['waiting', 'running', 'failed', 'pending']) s,
    generate_series(1, {BACKLOG});
INSERT INTO outbox (key, kind, data, created_at, status, attempts, next_at, fence, team_id,
  enterprise_id)
  SELECT 'backlog:' || g, 'run.reply', '{{}}', now(), 'pending', 0, now(), 0, 'T1', ''
  FROM generate_series(1, {BACKLOG}) g;
INSERT INTO approvals (id, run_id, position, kind, tool, args, args_hash, fingerprint, policy,
  requester, requested_at, deadline, reason_asked, status, votes, escalated, version)
  SELECT 'pending' || g, (SELECT id FROM runs WHERE status = 'waiting' LIMIT 1), g,
    'tool_call', 'refund', '{{}}', 'h', 'f', '{{}}', '{{}}', now(), now(), '', 'pending', '[]',
    false, 0
  FROM generate_series(1, {BACKLOG}) g;
INSERT INTO slack_home_tabs (workspace, user_id, opened_at, refreshes)
  VALUES ('T1', 'U_DANA', now(), 3);
"""


@pytest.fixture(scope="module")
def busy(pg_server_url: str) -> Iterator[tuple[SqlStore, str]]:
    """A database of its own, statistics taken before its backlogs (see the module)."""
    admin = make_url(pg_server_url).set(drivername="postgresql")
    with scratch_database(admin.render_as_string(hide_password=False), "signoff_keys") as dsn:
        store = open_store(pg_url(dsn))
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(SEED)
            yield store, dsn
        finally:
            store.engine.dispose()


def _sent_by(call: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> Sent:
    """Carry out ``call`` and return every statement it sent, with its parameters."""
    sent: Sent = []
    execute = psycopg.Cursor.execute

    def recording(cursor: Any, query: Any, params: Any = None, **options: Any) -> Any:
        sent.append((str(query), params))
        return execute(cursor, query, params, **options)

    run = LibpqPrepared.run

    def recording_libpq(statement: LibpqPrepared, channel: Any, params: Any, fetch: bool) -> Any:
        numbered = re.sub(r"\$(\d+)", r"%(p\1)s", statement.sql)  # explained by a cursor
        sent.append((numbered, {f"p{i}": value for i, value in enumerate(params, 1)}))
        return run(statement, channel, params, fetch)

    with monkeypatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", recording)
        patch.setattr(LibpqPrepared, "run", recording_libpq)
        call()
    return [
        (sql, params)
        for sql, params in sent
        if sql.lstrip().split(None, 1)[0].upper() in {"SELECT", "INSERT", "UPDATE", "WITH"}
    ]


def _status_indexes_read(engine: Engine, sent: Sent) -> list[str]:
    """The status indexes each statement's plan would read through, as 'index: statement'."""
    assert sent, "the operation sent no statement"
    found = []
    for sql, params in sent:
        shown = json.dumps(explain(engine, sql, params))
        found += [f"{index}: {sql[:120]}" for index in STATUS_INDEXES if index in shown]
    return found


def _run_of(dsn: str, status: str) -> RunId:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM runs WHERE status = %s LIMIT 1", (status,)).fetchone()
    assert row is not None
    return RunId(str(row[0]))


@dataclass
class Busy:
    """The busy database's store, with two leases and three runs taken before an operation is
    recorded."""

    store: SqlStore
    leases: tuple[Lease, Lease]
    waiting: RunId
    failed: RunId
    pending: RunId


def _adopted(store: SqlStore, dsn: str) -> Lease:
    lease = store.adopt_run(_run_of(dsn, "pending"), "w1", now=NOW, expires_at=NOW)
    assert lease is not None
    return lease


LATER = NOW + timedelta(seconds=30)
STEP = StepRecord(
    position=1, kind=StepKind.STEP, name="s", input_hash="h", started_at=NOW, finished_at=NOW
)
RUN_OPERATIONS: dict[str, Callable[[Busy], Any]] = {
    "an event delivered (a waiting run woken)": lambda busy: busy.store.deliver_event(
        busy.waiting, "approval:1", {}, NOW
    ),
    "a run adopted by id": lambda busy: busy.store.adopt_run(
        busy.waiting, "w1", now=NOW, expires_at=LATER
    ),
    "a failed run resumed": lambda busy: busy.store.resume(busy.failed, NOW),
    "a run cancelled": lambda busy: busy.store.cancel(busy.pending, NOW),
    "a lease renewed": lambda busy: busy.store.renew_lease(busy.leases[0], LATER),
    "leases renewed together": lambda busy: busy.store.renew_leases(list(busy.leases), LATER),
    "a step appended under a lease": lambda busy: busy.store.append_step(
        busy.leases[0],
        StepRecord(
            position=1,
            kind=StepKind.STEP,
            name="s",
            input_hash="h",
            started_at=NOW,
            finished_at=NOW,
        ),
    ),
    "a run completed under its lease": lambda busy: busy.store.complete(busy.leases[0], None, NOW),
}


@pytest.mark.parametrize("name", list(RUN_OPERATIONS))
def test_runs_found_by_id_are_read_through_their_key(
    busy: tuple[SqlStore, str], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each point operation on a run plans no read through the runs' status index."""
    store, dsn = busy
    leases = (_adopted(store, dsn), _adopted(store, dsn))
    target = Busy(store, leases, *(_run_of(dsn, s) for s in ("waiting", "failed", "pending")))
    sent = _sent_by(lambda: RUN_OPERATIONS[name](target), monkeypatch)
    assert _status_indexes_read(store.engine, sent) == []


def _claimed(outbox: SqlOutbox) -> QueuedNotice:
    (item,) = outbox.claim_due("d1", now=datetime(2100, 1, 1, tzinfo=UTC), until=LATER, limit=1)
    return item


NOTICE_OPERATIONS: dict[str, Callable[[SqlOutbox, QueuedNotice], Any]] = {
    "a send begun": lambda outbox, item: outbox.begin_send(item, now=NOW, until=LATER),
    "a delivery recorded": lambda outbox, item: outbox.delivered(item, None, NOW),
    "a retry planned": lambda outbox, item: outbox.retry_later(item, LATER, "boom"),
    "a notice given up": lambda outbox, item: outbox.give_up(item, "boom"),
    "where a notice landed": lambda outbox, item: outbox.delivery_of(item.notice.key),
}


@pytest.mark.parametrize("name", list(NOTICE_OPERATIONS))
def test_notices_found_by_id_are_read_through_their_key(
    busy: tuple[SqlStore, str], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step of a notice's delivery plans no read through the outbox's status index."""
    store, _ = busy
    outbox = SqlOutbox(store.engine)
    item = _claimed(outbox)
    sent = _sent_by(lambda: NOTICE_OPERATIONS[name](outbox, item), monkeypatch)
    assert _status_indexes_read(store.engine, sent) == []


def test_a_home_tab_refresh_finds_the_waiting_one_by_its_key(
    busy: tuple[SqlStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh for a person whose tab is open checks their waiting one by its key."""
    store, _ = busy
    notice = Notice(
        key="home:T1:U_DANA",
        run_id=None,
        kind=HOME_REFRESH,
        data={"user": {"user_id": "U_DANA"}},
        team_id="T1",
    )

    def refresh() -> None:
        with store.engine.begin() as conn:
            queue_refreshes(conn, [notice], NOW)

    sent = _sent_by(refresh, monkeypatch)
    assert _status_indexes_read(store.engine, sent) == []


def test_a_decision_batch_finds_its_rows_by_their_keys(busy: tuple[SqlStore, str]) -> None:
    """The pipelined batch's refresh and wake-up, and a cancelled run's pending approvals,
    plan no read through a status index."""
    store, dsn = busy
    sql = DecisionStatements(store.engine.dialect)
    person: dict[str, Any] = {
        "workspace": "T1",
        "user_id": "U_DANA",
        "key": "home:T1:U_DANA",
        "run_id": None,
        "kind": HOME_REFRESH,
        "data": {},
        "team_id": "T1",
        "enterprise_id": "",
    }
    waiting = _run_of(dsn, "waiting")
    event = {"run_id": waiting, "key": "approval:1", "data": {}, "delivered_at": NOW}
    of_run = Prepared(PENDING_OF_RUN, store.engine.dialect)
    sent = [
        (sql.refresh.sql, sql.refresh.params([person], now=NOW, spacing=timedelta(seconds=1))),
        (sql.deliver.sql, sql.deliver.params([event], now=NOW)),
        (of_run.sql, of_run.params({"run_id": waiting})),
    ]
    assert _status_indexes_read(store.engine, sent) == []


def test_a_batchs_rows_are_updated_through_their_keys(busy: tuple[SqlStore, str]) -> None:
    """A batch's approvals saved and runs woken are found through their keys, not by
    reading the whole table: the planner is told how many rows a batch holds."""
    store, dsn = busy
    sql = DecisionStatements(store.engine.dialect)
    saved = [{name: None for name in ("id", *WRITTEN)} | {"id": f"pending{n}"} for n in range(8)]
    waiting = _run_of(dsn, "waiting")
    events = [{"run_id": waiting, "key": "approval:1", "data": {}, "delivered_at": NOW}] * 8
    for statement, params in (
        (sql.save.sql, sql.save.params(saved)),
        (sql.deliver.sql, sql.deliver.params(events, now=NOW)),
    ):
        nodes = plan_nodes(explain(store.engine, statement, params)["Plan"])
        scans = [node for node in nodes if node["Node Type"] == "Seq Scan"]
        assert scans == [], statement[:80]
