"""``signoff prune``: remove finished runs in batches, each archived and synced first."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, delete, select

from agent_runtime.ids import RunId
from store.archive.file import ArchiveWriter
from store.archive.format import FINISHED, RUN_TABLES, RunArchive, no_rows
from store.errors import translated
from store.models import outbox, runs
from store.outbox import PENDING

BATCH_SIZE = 200


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What a prune removed (or, in a dry run, would remove) and what it had to keep."""

    cutoff: datetime
    dry_run: bool
    removed: tuple[RunId, ...]
    skipped: tuple[RunId, ...]
    """Finished runs old enough to go but with notices not yet delivered."""
    rows: Mapping[str, int]
    """Rows removed per table, the runs included."""


@dataclass(frozen=True, slots=True)
class _Batch:
    last: RunId
    chosen: list[RunArchive]
    skipped: list[RunId]


def prune(
    engine: Engine,
    *,
    cutoff: datetime,
    archive: Path | None = None,
    dry_run: bool = False,
    batch_size: int = BATCH_SIZE,
) -> PruneResult:
    """Remove the finished runs last updated before ``cutoff``, archiving them first if asked.

    Pending, running and waiting runs are never touched; nor is a finished run with a
    notice not yet delivered (its last Slack message would be lost), which is reported
    as skipped. A dry run reads the same batches and changes nothing, not even the archive.
    """
    writer = None if archive is None or dry_run else ArchiveWriter(archive)
    removed: list[RunId] = []
    skipped: list[RunId] = []
    rows = no_rows()
    after: RunId | None = None
    try:
        while batch := _prune_batch(engine, cutoff, after, batch_size, writer, dry_run):
            after = batch.last
            removed += [found.run_id for found in batch.chosen]
            skipped += batch.skipped
            for found in batch.chosen:
                rows.update(found.counts())
    finally:
        if writer is not None:
            writer.close()
    return PruneResult(
        cutoff=cutoff,
        dry_run=dry_run,
        removed=tuple(removed),
        skipped=tuple(skipped),
        rows=dict(rows),
    )


def _prune_batch(
    engine: Engine,
    cutoff: datetime,
    after: RunId | None,
    limit: int,
    writer: ArchiveWriter | None,
    dry_run: bool,
) -> _Batch | None:
    """Take the next batch in one transaction: read, archive (synced), then delete."""
    with translated(), engine.begin() as conn:
        ids = _candidates(conn, cutoff, after, limit, lock=not dry_run)
        if not ids:
            return None
        notices = _rows_of(conn, outbox, ids)
        blocked = {row["run_id"] for row in notices if row["status"] == PENDING}
        chosen = _read(conn, [i for i in ids if i not in blocked], notices)
        if writer is not None:
            writer.append(chosen)
        if not dry_run:
            _delete(conn, chosen)
    return _Batch(last=ids[-1], chosen=chosen, skipped=[i for i in ids if i in blocked])


def _candidates(
    conn: Connection, cutoff: datetime, after: RunId | None, limit: int, *, lock: bool
) -> list[RunId]:
    """The next finished runs last updated before ``cutoff``, by id; locked if asked."""
    query = (
        select(runs.c.id)
        .where(runs.c.status.in_(FINISHED), runs.c.updated_at < cutoff)
        .order_by(runs.c.id)
        .limit(limit)
    )
    if after is not None:
        query = query.where(runs.c.id > after)
    if lock:
        query = query.with_for_update()
    return [RunId(found) for found in conn.execute(query).scalars()]


def _rows_of(conn: Connection, table: Table, ids: Sequence[str]) -> list[dict[str, Any]]:
    """Every row of ``table`` belonging to the runs ``ids``, in primary key order."""
    if not ids:
        return []
    query = select(table).where(table.c.run_id.in_(ids)).order_by(*table.primary_key.columns)
    return [row._asdict() for row in conn.execute(query)]


def _read(conn: Connection, ids: list[RunId], notices: list[dict[str, Any]]) -> list[RunArchive]:
    """Read the runs ``ids`` with all their rows (their notices are read already)."""
    if not ids:
        return []
    found = {row.id: row._asdict() for row in conn.execute(select(runs).where(runs.c.id.in_(ids)))}
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for table in RUN_TABLES:
        for row in notices if table is outbox else _rows_of(conn, table, ids):
            grouped[row["run_id"]][table.name].append(row)
    return [
        RunArchive(run=found[i], rows={t.name: grouped[i][t.name] for t in RUN_TABLES})
        for i in ids
        if i in found
    ]


def _delete(conn: Connection, archived: list[RunArchive]) -> None:
    """Delete exactly what was archived: the runs' rows, their read notices, then the runs."""
    ids = [found.run_id for found in archived]
    if not ids:
        return
    for table in RUN_TABLES:
        if table is not outbox:
            conn.execute(delete(table).where(table.c.run_id.in_(ids)))
    notice_ids = [row["id"] for found in archived for row in found.rows[outbox.name]]
    if notice_ids:  # by id: a notice queued meanwhile stays, to be delivered
        conn.execute(delete(outbox).where(outbox.c.id.in_(notice_ids)))
    conn.execute(delete(runs).where(runs.c.id.in_(ids)))
