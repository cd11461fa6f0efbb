"""``signoff import``: restore the runs of an archive, one transaction per run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, text
from sqlalchemy import exc as sa_exc

from agent_runtime.ids import RunId
from store import dialects
from store.archive.file import read_archive
from store.archive.format import RUN_TABLES, ArchiveError, RunArchive, no_rows
from store.errors import translated
from store.models import outbox, runs

_ADVANCE_OUTBOX_IDS = text(  # past the ids just restored, never back
    "SELECT setval(pg_get_serial_sequence('outbox', 'id'),"
    " GREATEST(nextval(pg_get_serial_sequence('outbox', 'id')), (SELECT max(id) FROM outbox)))"
)


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import restored and which runs it found already present."""

    imported: tuple[RunId, ...]
    existing: tuple[RunId, ...]
    rows: Mapping[str, int]
    """Rows restored per table, the runs included."""


def import_archive(engine: Engine, path: Path) -> ImportResult:
    """Restore the runs of an archive, one transaction per run; runs present are skipped.

    Every line is validated before anything is written: a malformed line, an unknown
    format or version, or a column this database lacks raises ArchiveError naming the
    line, and nothing is imported. When a run appears on several lines, the last wins.
    """
    last_line = {found.run_id: number for number, found in read_archive(path)}
    imported: list[RunId] = []
    existing: list[RunId] = []
    rows = no_rows()
    for number, found in read_archive(path):
        if last_line[found.run_id] != number:
            continue
        if _restore(engine, found, path, number):
            imported.append(found.run_id)
            rows.update(found.counts())
        else:
            existing.append(found.run_id)
    return ImportResult(imported=tuple(imported), existing=tuple(existing), rows=dict(rows))


def _restore(engine: Engine, found: RunArchive, path: Path, number: int) -> bool:
    """Insert one run and its rows in one transaction; False if the run exists already."""
    try:
        with translated(), engine.begin() as conn:
            if not _insert_run(conn, found.run):
                return False
            for table in RUN_TABLES:
                if table is not outbox and found.rows[table.name]:
                    conn.execute(insert(table), found.rows[table.name])
            _insert_notices(conn, found.rows[outbox.name])
    except sa_exc.IntegrityError as exc:
        detail = str(exc.orig).strip().splitlines()[0]
        raise ArchiveError(
            path, number, f"run {found.run_id} conflicts with stored rows: {detail}"
        ) from exc
    return True


def _insert_notices(conn: Connection, notices: list[dict[str, Any]]) -> None:
    """Insert the run's notices under their own ids, or under new ones where taken.

    A notice's id only orders the delivery of its run's notices, and these were all
    delivered; another database, or SQLite reusing the highest id, may have given it away.
    """
    if not notices:
        return
    query = select(outbox.c.id).where(outbox.c.id.in_([row["id"] for row in notices]))
    taken = set(conn.execute(query).scalars())
    if free := [row for row in notices if row["id"] not in taken]:
        conn.execute(insert(outbox), free)
        if conn.dialect.name == "postgresql":
            conn.execute(_ADVANCE_OUTBOX_IDS)
    if renumbered := [
        {k: v for k, v in row.items() if k != "id"} for row in notices if row["id"] in taken
    ]:
        conn.execute(insert(outbox), renumbered)


def _insert_run(conn: Connection, run: dict[str, Any]) -> bool:
    """Insert the run's row unless its id is taken; tell whether it was inserted."""
    statement = (
        dialects.insert(runs, conn.dialect.name)
        .values(run)
        .on_conflict_do_nothing(index_elements=[c.name for c in runs.primary_key])
        .returning(runs.c.id)
    )
    return conn.execute(statement).first() is not None
