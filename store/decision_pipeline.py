"""A batch of decisions on PostgreSQL in three round trips, whatever its size.

``store.approval_saves.decide_many`` sends a batch's statements one at a time: a dozen round
trips, each waited for while the batch's rows are locked, and SQLAlchemy's execution
machinery around each. Here the statements, compiled once, go through the transaction's
driver connection in pipeline mode: statements whose results nothing waits for are sent
together with the next ones that are waited for, so a batch waits for the server three
times:

1. the approvals, locked and read (with the transaction's BEGIN);
2. the approvals written; their notices queued (a Home tab refresh only for a person who
   opened their tab, as ``store.home_tabs.queue_refreshes`` does); the runs locked, the
   events of those not finished stored and the runs waiting for them woken; the audit
   chains' heads locked and read;
3. the audit entries appended, the heads moved, and the COMMIT.

Each write is one statement for the whole batch, its rows sent as one JSON document
(``store.pg_rows``). The server runs a trip's statements in order, so the locks are taken
in ``decide_many``'s order (approvals, Home tabs and the refreshes waiting, runs, and the
chains' heads last, so that they are held for the append and the commit only), and every
decision has the same outcome.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import ARRAY, Connection, Dialect, Engine, Integer, any_, bindparam, select

from agent_runtime.audit import shard_of
from agent_runtime.audit_keys import AuditKeys
from agent_runtime.exceptions import RunNotFound
from agent_runtime.notices import Notice
from agent_runtime.records import RunStatus
from agent_runtime.store import Save
from store.approval_rows import CHANGING, approval_of, changes
from store.approval_saves import Decided, Deciding, judge_in_order
from store.audit_chains import ENTRY_FIELDS, chained, entry_row, last_of_each, require_heads
from store.driver import Prepared, as_sqlalchemy_error
from store.errors import translated
from store.home_tabs import (
    HOME_REFRESH,
    REFRESH_SPACING,
    Person,
    refreshes_by_person,
)
from store.models import approvals, audit_head, audit_log, events, outbox, runs, slack_home_tabs
from store.notify import CHANNEL, wake_here
from store.outbox_rows import PENDING, QUEUED, queued_row
from store.pg_rows import JsonRows, insert_rows, recordset, update_rows
from store.row_checks import ROW_HAS_SQL

WRITTEN = (*CHANGING, "version")
"""The columns a decision writes."""
DELIVERED = ("run_id", "key", "data", "delivered_at")
"""The columns of a delivered event."""


class DecisionStatements:
    """The statements of a batch, compiled once for a PostgreSQL dialect; those that write
    take every row of the batch in one statement (``store.pg_rows``)."""

    def __init__(self, dialect: Dialect) -> None:
        self.lock_approvals = Prepared(
            select(approvals)
            .where(approvals.c.id == any_(bindparam("ids", type_=ARRAY(approvals.c.id.type))))
            .order_by(approvals.c.id)
            .with_for_update(),
            dialect,
            approvals.c,
        )
        self.save = update_rows(approvals, "id", WRITTEN, dialect)
        self.queue = insert_rows(outbox, QUEUED, dialect, "ON CONFLICT (key) DO NOTHING")
        wanted = [
            slack_home_tabs.c.workspace,
            slack_home_tabs.c.user_id,
            *(outbox.c[name] for name in ("key", "run_id", "kind", "data", "team_id")),
            outbox.c.enterprise_id,
        ]
        self.refresh = JsonRows(  # store.home_tabs.queue_refreshes, for every person at once
            f"WITH wanted AS (SELECT * FROM {recordset(wanted, dialect)}), "
            "tab AS (SELECT t.workspace, t.user_id, t.refreshes, w.key FROM slack_home_tabs t"
            " JOIN wanted w USING (workspace, user_id)"
            " ORDER BY t.workspace, t.user_id FOR UPDATE OF t), "
            # the person's refresh still waiting to be sent shows this change: kept so
            "held AS (UPDATE outbox o SET next_at = o.next_at FROM tab"
            " WHERE o.key = tab.key || ':' || tab.refreshes"
            f" AND o.status {ROW_HAS_SQL} '{PENDING}' AND o.sending_at IS NULL"
            " RETURNING tab.workspace, tab.user_id), "
            "numbered AS (UPDATE slack_home_tabs t SET refreshes = t.refreshes + 1,"
            " refresh_due_at = CASE WHEN t.refresh_due_at IS NULL THEN %(now)s"
            " ELSE GREATEST(%(now)s, t.refresh_due_at + %(spacing)s) END"
            " FROM tab WHERE t.workspace = tab.workspace AND t.user_id = tab.user_id"
            " AND NOT EXISTS (SELECT FROM held h"
            " WHERE h.workspace = t.workspace AND h.user_id = t.user_id)"
            " RETURNING t.workspace, t.user_id, t.refreshes, t.refresh_due_at) "
            "INSERT INTO outbox (key, run_id, kind, data, created_at, status, attempts,"
            " next_at, fence, team_id, enterprise_id)"
            " SELECT w.key || ':' || n.refreshes, w.run_id, w.kind, w.data, %(now)s,"
            f" '{PENDING}', 0, n.refresh_due_at, 0, w.team_id, w.enterprise_id"
            " FROM numbered n JOIN wanted w USING (workspace, user_id)"
            " ON CONFLICT (key) DO NOTHING",
            wanted,
        )
        self.lock_runs = Prepared(
            select(runs.c.id, runs.c.status)
            .where(runs.c.id == any_(bindparam("ids", type_=ARRAY(runs.c.id.type))))
            .order_by(runs.c.id)
            .with_for_update(),
            dialect,
            (runs.c.id, runs.c.status),
        )
        finished = ", ".join(f"'{status.value}'" for status in RunStatus if status.finished)
        arriving = recordset([events.c[name] for name in DELIVERED], dialect)
        self.deliver = JsonRows(  # the events of live runs stored, the runs waiting woken
            "WITH stored AS (INSERT INTO events (run_id, key, data, delivered_at)"
            f" SELECT v.run_id, v.key, v.data, v.delivered_at FROM {arriving}"
            f" JOIN runs r ON r.id = v.run_id WHERE r.status NOT IN ({finished})"
            " ON CONFLICT DO NOTHING RETURNING run_id, key) "
            f"UPDATE runs SET status = '{RunStatus.PENDING.value}', due_at = %(now)s, "
            "wait_key = NULL, updated_at = %(now)s FROM stored "
            f"WHERE runs.id = stored.run_id AND runs.status {ROW_HAS_SQL} "
            f"'{RunStatus.WAITING.value}' "
            f"AND runs.wait_key = stored.key RETURNING pg_notify('{CHANNEL}', '')",
            [events.c[name] for name in DELIVERED],
        )
        self.lock_heads = Prepared(
            select(audit_head.c.shard, audit_head.c.seq, audit_head.c.hash)
            .where(audit_head.c.shard == any_(bindparam("shards", type_=ARRAY(Integer))))
            .order_by(audit_head.c.shard)
            .with_for_update(),
            dialect,
            (audit_head.c.shard, audit_head.c.seq, audit_head.c.hash),
        )
        self.add_entries = insert_rows(audit_log, ENTRY_FIELDS, dialect)
        self.move_heads = update_rows(audit_head, "shard", ("seq", "hash"), dialect)


def decide_pipelined(
    engine: Engine,
    sql: DecisionStatements,
    keys: AuditKeys | None,
    decisions: Sequence[Deciding],
) -> list[Decided | BaseException]:
    """``store.approval_saves.decide_many`` on PostgreSQL, in a transaction of its own
    whose COMMIT goes with the last writes."""
    with translated(), engine.connect() as conn, _wrapped(conn):
        driver: Any = conn.connection.driver_connection
        transaction = conn.begin()
        try:
            with driver.pipeline() as pipeline:
                ids = sorted({decision.approval_id for decision in decisions})
                locking = _send(driver, sql.lock_approvals, {"ids": ids})
                pipeline.sync()
                rows = sql.lock_approvals.rows(locking.fetchall())
                outcomes, winners = judge_in_order([approval_of(row) for row in rows], decisions)
                if winners:
                    _write(driver, pipeline, sql, keys, winners)
                transaction.commit()  # the COMMIT goes with the last writes
        except BaseException:
            transaction.rollback()  # out of the pipeline, which has kept the first error
            raise
    if any(save.wake is not None for save in winners):
        wake_here(engine)  # this process's workers, where they hear no NOTIFY
    return outcomes


def _write(
    driver: Any,
    pipeline: Any,
    sql: DecisionStatements,
    keys: AuditKeys | None,
    winners: Sequence[Save],
) -> None:
    now = max(save.audit.at for save in winners)
    notices = [notice for save in winners for notice in save.notices]
    refreshes = refreshes_by_person([n for n in notices if n.kind == HOME_REFRESH])
    wakes = [(save.approval.run_id, save.wake) for save in winners if save.wake is not None]
    # trip 2: the writes nothing waits for, with the reads the next trip needs: the runs
    # and the chains' heads locked
    last = {save.approval.id: save for save in winners}  # an approval decided twice: the last
    _send_rows(driver, sql.save, [_saved(save) for save in last.values()])
    queued = [queued_row(n, now) for n in notices if n.kind != HOME_REFRESH]
    _send_rows(driver, sql.queue, queued)
    if refreshes:
        _send_rows(driver, sql.refresh, _refreshing(refreshes), now=now, spacing=REFRESH_SPACING)
    run_ids = sorted({run_id for run_id, _ in wakes})
    locked_runs = _send(driver, sql.lock_runs, {"ids": run_ids}) if wakes else None
    delivered = [
        {"run_id": run_id, "key": wake.key, "data": wake.data, "delivered_at": wake.delivered_at}
        for run_id, wake in wakes
    ]
    if delivered:  # a finished run's event is left out, by the statement
        woken_at = max(row["delivered_at"] for row in delivered)
        _send_rows(driver, sql.deliver, delivered, now=woken_at)
    drafts = [save.audit for save in winners]
    shards = sorted({shard_of(draft.run_id) for draft in drafts})
    locking = _send(driver, sql.lock_heads, {"shards": shards})  # last, as everywhere
    pipeline.sync()
    if locked_runs is not None:
        _all_found(run_ids, sql.lock_runs.rows(locked_runs.fetchall()))
    heads = {row.shard: (row.seq, row.hash) for row in sql.lock_heads.rows(locking.fetchall())}
    require_heads(shards, heads)
    # trip 3: the entries appended, each chain's head moved once, and the commit
    entries = chained(drafts, heads, keys)
    _send_rows(driver, sql.add_entries, [entry_row(entry) for entry in entries])
    _send_rows(driver, sql.move_heads, [entry_row(entry) for entry in last_of_each(entries)])


def _all_found(run_ids: Sequence[str], rows: Sequence[Any]) -> None:
    """``RunNotFound`` unless ``rows`` (the runs locked) hold every one of ``run_ids``."""
    found = {row.id for row in rows}
    for run_id in run_ids:
        if run_id not in found:
            raise RunNotFound(run_id)


def _refreshing(refreshes: dict[Person, Notice]) -> list[dict[str, Any]]:
    """The rows of ``DecisionStatements.refresh``, in one lock order."""
    return [
        {
            "workspace": person[0],
            "user_id": person[1],
            "key": notice.key,
            "run_id": notice.run_id,
            "kind": notice.kind,
            "data": notice.data,
            "team_id": notice.team_id,
            "enterprise_id": notice.enterprise_id,
        }
        for person, notice in sorted(refreshes.items())
    ]


def _saved(save: Save) -> dict[str, Any]:
    return changes(save.approval) | {"id": save.approval.id, "version": save.approval.version + 1}


def _send(driver: Any, statement: Prepared, values: dict[str, Any]) -> Any:
    """Queue ``statement`` on a cursor of its own (its rows are read after a sync)."""
    cursor = driver.cursor()
    cursor.execute(statement.sql, statement.params(values))
    return cursor


def _send_rows(driver: Any, statement: JsonRows, rows: Sequence[Any], **values: Any) -> None:
    """Queue ``statement`` with ``rows`` (if any): nothing waits for its result."""
    if rows:
        driver.cursor().execute(statement.sql, statement.params(rows, **values))


@contextmanager
def _wrapped(conn: Connection) -> Iterator[None]:
    """Driver errors come out as SQLAlchemy's, and a broken connection is not reused."""
    try:
        yield
    except Exception as exc:
        driver = conn.connection.driver_connection
        error = as_sqlalchemy_error(conn.dialect, exc, driver, None, None)
        if error is exc:
            raise
        if getattr(error, "connection_invalidated", False):
            conn.invalidate()
        raise error from exc
