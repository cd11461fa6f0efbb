"""Retention: archive finished runs as JSON lines, remove them, and import them back.

An archive holds one JSON document per line, one run each::

    {"format": "signoff-archive", "version": 1, "run": {...}, "steps": [...],
     "attempts": [...], "events": [...], "approvals": [...], "outbox": [...]}

Every row carries every column of its table, by name, so a column added to the schema
later is archived and restored with no change here. Timestamps are ISO-8601 with their
offset and microseconds; JSON columns hold their document as is; other values are plain
JSON. The approvals audit log is neither archived nor removed: it is a hash chain, and
removing entries would break it.

Removal goes in batches, each one transaction: the batch's runs are locked, read,
appended to the archive and synced to disk, and only then deleted. A crash in between
leaves the runs in the database and, at worst, in the archive twice; importing an archive
keeps the last line of each run.
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Connection,
    DateTime,
    Engine,
    Float,
    Integer,
    String,
    Table,
    delete,
    insert,
    select,
    text,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite

from agent_runtime.exceptions import SignoffError
from agent_runtime.ids import RunId
from agent_runtime.records import RunStatus
from store.errors import translated
from store.models import approvals, attempts, events, outbox, runs, steps
from store.outbox import PENDING
from store.types import HexUuid, UTCDateTime

FORMAT = "signoff-archive"
VERSION = 1
FINISHED = (RunStatus.COMPLETED.value, RunStatus.FAILED.value, RunStatus.CANCELLED.value)
RUN_TABLES: tuple[Table, ...] = (steps, attempts, events, approvals, outbox)
"""The tables holding a run's rows, by their ``run_id`` column (the outbox has no foreign key)."""
BATCH_SIZE = 200
TAIL_CHUNK = 65536
LINE_START = f'{{"format":"{FORMAT}","version":'.encode("ascii")
"""How every line this module writes begins."""

_ADVANCE_OUTBOX_IDS = text(  # past the ids just restored, never back
    "SELECT setval(pg_get_serial_sequence('outbox', 'id'),"
    " GREATEST(nextval(pg_get_serial_sequence('outbox', 'id')), (SELECT max(id) FROM outbox)))"
)


class ArchiveError(SignoffError):
    """An archive cannot be written, read or imported (``line`` says where, when it can)."""

    def __init__(self, path: Path, line: int | None, detail: str) -> None:
        where = f"{path}" if line is None else f"line {line} of {path}"
        super().__init__(f"{where}: {detail}")
        self.path = path
        self.line = line
        self.detail = detail


@dataclass(frozen=True, slots=True)
class RunArchive:
    """One run's rows: its ``runs`` row and its rows in each of ``RUN_TABLES``, by table name."""

    run: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]]

    @property
    def run_id(self) -> RunId:
        """The run's id."""
        return RunId(self.run["id"])

    def counts(self) -> Counter[str]:
        """Rows per table, this run's row included."""
        return Counter({"runs": 1} | {name: len(found) for name, found in self.rows.items()})

    def to_json(self) -> dict[str, Any]:
        """Return the archive document of this run."""
        doc: dict[str, Any] = {"format": FORMAT, "version": VERSION,
                               "run": _encode_row(runs, self.run)}
        for table in RUN_TABLES:
            doc[table.name] = [_encode_row(table, row) for row in self.rows[table.name]]
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> RunArchive:
        """Validate and decode an archive document; ValueError says what is wrong."""
        _check_header(doc)
        run = _decode_row(runs, doc["run"])
        if run.get("status") not in FINISHED:
            raise ValueError(f"run {run.get('id')} is {run.get('status')}, not finished")
        rows = {table.name: _decode_rows(table, doc[table.name], run["id"])
                for table in RUN_TABLES}
        return cls(run=run, rows=rows)


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
class ImportResult:
    """What an import restored and which runs it found already present."""

    imported: tuple[RunId, ...]
    existing: tuple[RunId, ...]
    rows: Mapping[str, int]
    """Rows restored per table, the runs included."""


def _no_rows() -> Counter[str]:
    """A count of zero rows for the runs and each of ``RUN_TABLES``."""
    return Counter(dict.fromkeys(["runs", *(t.name for t in RUN_TABLES)], 0))


# --- prune --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Batch:
    last: RunId
    chosen: list[RunArchive]
    skipped: list[RunId]


def prune(
    engine: Engine, *, cutoff: datetime, archive: Path | None = None, dry_run: bool = False,
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
    rows = _no_rows()
    after: RunId | None = None
    try:
        while (batch := _prune_batch(engine, cutoff, after, batch_size, writer, dry_run)):
            after = batch.last
            removed += [found.run_id for found in batch.chosen]
            skipped += batch.skipped
            for found in batch.chosen:
                rows.update(found.counts())
    finally:
        if writer is not None:
            writer.close()
    return PruneResult(cutoff=cutoff, dry_run=dry_run, removed=tuple(removed),
                       skipped=tuple(skipped), rows=dict(rows))


def _prune_batch(
    engine: Engine, cutoff: datetime, after: RunId | None, limit: int,
    writer: ArchiveWriter | None, dry_run: bool,
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
    query = (select(runs.c.id)
             .where(runs.c.status.in_(FINISHED), runs.c.updated_at < cutoff)
             .order_by(runs.c.id).limit(limit))
    if after is not None:
        query = query.where(runs.c.id > after)
    if lock:
        query = query.with_for_update()
    return [RunId(found) for found in conn.execute(query).scalars()]


def _rows_of(conn: Connection, table: Table, ids: Sequence[str]) -> list[dict[str, Any]]:
    """Every row of ``table`` belonging to the runs ``ids``, in primary key order."""
    if not ids:
        return []
    query = (select(table).where(table.c.run_id.in_(ids))
             .order_by(*table.primary_key.columns))
    return [row._asdict() for row in conn.execute(query)]


def _read(
    conn: Connection, ids: list[RunId], notices: list[dict[str, Any]]
) -> list[RunArchive]:
    """Read the runs ``ids`` with all their rows (their notices are read already)."""
    if not ids:
        return []
    found = {row.id: row._asdict() for row in conn.execute(select(runs).where(runs.c.id.in_(ids)))}
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for table in RUN_TABLES:
        for row in notices if table is outbox else _rows_of(conn, table, ids):
            grouped[row["run_id"]][table.name].append(row)
    return [RunArchive(run=found[i], rows={t.name: grouped[i][t.name] for t in RUN_TABLES})
            for i in ids if i in found]


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


class ArchiveWriter:
    """Appends runs to an archive file and syncs them to disk before the caller deletes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        created = not path.exists()
        with _os_errors(path, "cannot open for writing"):
            self._pending_newline = not created and _repair_end(path)
            self._file: BinaryIO = path.open("ab")
        if created:
            with _os_errors(path, "cannot sync its directory"):
                _sync_directory(path.parent)

    def append(self, archived: Sequence[RunArchive]) -> None:
        """Write one line per run, then flush and fsync."""
        data = b"".join(_line(found) for found in archived)
        if not data:
            return
        if self._pending_newline:  # a whole last line that lacks its newline keeps its own
            data, self._pending_newline = b"\n" + data, False
        with _os_errors(self.path, "cannot write"):
            self._file.write(data)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file."""
        self._file.close()


@contextmanager
def _os_errors(path: Path, what: str) -> Iterator[None]:
    """Turn an OSError into an ArchiveError naming the file."""
    try:
        yield
    except OSError as exc:
        raise ArchiveError(path, None, f"{what}: {exc.strerror or exc}") from exc


def _line(found: RunArchive) -> bytes:
    return (json.dumps(found.to_json(), separators=(",", ":")) + "\n").encode("ascii")


def _repair_end(path: Path) -> bool:
    """Drop a last line cut short by a crash; tell whether another last line lacks its newline.

    A line cut short starts like an archive line but is not JSON. Its runs were not
    deleted (deletion waits for the sync), so this prune archives them again. Any other
    unfinished last line is kept, on a line of its own.
    """
    with path.open("r+b") as handle:
        end = handle.seek(0, os.SEEK_END)
        start = _last_line_start(handle, end)
        if start == end:
            return False
        handle.seek(start)
        if not _torn(handle.read()):
            return True
        handle.truncate(start)
        os.fsync(handle.fileno())
    return False


def _torn(tail: bytes) -> bool:
    """Tell whether ``tail`` is the beginning of an archive line that was never finished."""
    if not (tail.startswith(LINE_START) or LINE_START.startswith(tail)):
        return False
    try:
        json.loads(tail)
    except ValueError:
        return True
    return False


def _last_line_start(handle: BinaryIO, end: int) -> int:
    """The offset just after the last newline before ``end`` (0 if there is none)."""
    position = end
    while position > 0:
        size = min(TAIL_CHUNK, position)
        handle.seek(position - size)
        newline = handle.read(size).rfind(b"\n")
        if newline >= 0:
            return position - size + newline + 1
        position -= size
    return 0


def _sync_directory(directory: Path) -> None:
    """Make a new file's directory entry durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# --- import -------------------------------------------------------------------------------


def import_archive(engine: Engine, path: Path) -> ImportResult:
    """Restore the runs of an archive, one transaction per run; runs present are skipped.

    Every line is validated before anything is written: a malformed line, an unknown
    format or version, or a column this database lacks raises ArchiveError naming the
    line, and nothing is imported. When a run appears on several lines, the last wins.
    """
    last_line = {found.run_id: number for number, found in read_archive(path)}
    imported: list[RunId] = []
    existing: list[RunId] = []
    rows = _no_rows()
    for number, found in read_archive(path):
        if last_line[found.run_id] != number:
            continue
        if _restore(engine, found, path, number):
            imported.append(found.run_id)
            rows.update(found.counts())
        else:
            existing.append(found.run_id)
    return ImportResult(imported=tuple(imported), existing=tuple(existing), rows=dict(rows))


def read_archive(path: Path) -> Iterator[tuple[int, RunArchive]]:
    """Yield each run of an archive with its line number; blank lines are skipped."""
    with _os_errors(path, "cannot read"):
        handle = path.open("rb")
    with handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                yield number, _parse_line(path, number, raw)


def _parse_line(path: Path, number: int, raw: bytes) -> RunArchive:
    try:
        return RunArchive.from_json(json.loads(raw.decode("utf-8")))
    except UnicodeDecodeError:
        raise ArchiveError(path, number, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ArchiveError(path, number, f"not JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError as exc:
        raise ArchiveError(path, number, str(exc)) from None


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
        raise ArchiveError(path, number,
                           f"run {found.run_id} conflicts with stored rows: {detail}") from exc
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
    if renumbered := [{k: v for k, v in row.items() if k != "id"}
                      for row in notices if row["id"] in taken]:
        conn.execute(insert(outbox), renumbered)


def _insert_run(conn: Connection, run: dict[str, Any]) -> bool:
    """Insert the run's row unless its id is taken; tell whether it was inserted."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = (dialect.insert(runs).values(run)
                 .on_conflict_do_nothing(index_elements=[c.name for c in runs.primary_key])
                 .returning(runs.c.id))
    return conn.execute(statement).first() is not None


# --- the document's values ----------------------------------------------------------------


def _check_header(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    kind, version = doc.get("format"), doc.get("version")
    if kind != FORMAT or type(version) is not int or version != VERSION:
        raise ValueError(f"unknown archive format {kind!r} version {version!r}"
                         f" (this Signoff reads {FORMAT!r} version {VERSION})")
    expected = {"format", "version", "run", *(t.name for t in RUN_TABLES)}
    if extra := sorted(set(doc) - expected):
        raise ValueError(f"unknown key {extra[0]!r}")
    if missing := sorted(expected - set(doc)):
        raise ValueError(f"missing key {missing[0]!r}")


def _decode_rows(table: Table, value: Any, run_id: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise ValueError(f"{table.name!r} must be a list")
    decoded = [_decode_row(table, row) for row in value]
    if any(row.get("run_id") != run_id for row in decoded):
        raise ValueError(f"a row of {table.name!r} belongs to another run than {run_id}")
    if len({frozenset(row) for row in decoded}) > 1:
        raise ValueError(f"the rows of {table.name!r} have different columns")
    return decoded


def _decode_row(table: Table, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"a row of {table.name!r} must be an object")
    codecs = _codecs(table)
    if unknown := sorted(set(value) - set(codecs)):
        raise ValueError(f"{table.name} has no column {unknown[0]!r} here"
                         " (run `signoff db upgrade`, or use a newer Signoff)")
    if missing := [c.name for c in table.columns if _required(c) and c.name not in value]:
        raise ValueError(f"a row of {table.name!r} lacks {missing[0]!r}")
    return {name: _decode_value(table.c[name], codecs[name], item)
            for name, item in value.items()}


def _decode_value(column: Column[Any], codec: _Codec, value: Any) -> Any:
    where = f"{column.table.name}.{column.name}"
    if value is None:
        if not column.nullable:
            raise ValueError(f"{where} must not be null")
        return None
    try:
        return codec.decode(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def _required(column: Column[Any]) -> bool:
    return not column.nullable and column.default is None and column.server_default is None


def _encode_row(table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    codecs = _codecs(table)
    return {name: None if value is None else codecs[name].encode(value)
            for name, value in row.items()}


@dataclass(frozen=True, slots=True)
class _Codec:
    """How a column's values become JSON and back (``decode`` checks the value's shape)."""

    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


@functools.cache
def _codecs(table: Table) -> dict[str, _Codec]:
    return {column.name: _codec(column) for column in table.columns}


def _codec(column: Column[Any]) -> _Codec:
    kind = column.type
    if isinstance(kind, JSON):
        return _Codec(_same, _same)
    if isinstance(kind, HexUuid):
        return _Codec(_same, _hex)
    if isinstance(kind, UTCDateTime):
        return _Codec(_iso, _aware_datetime)
    if isinstance(kind, DateTime):
        return _Codec(_iso, datetime.fromisoformat)
    if isinstance(kind, Boolean):
        return _Codec(_same, _of(bool))
    if isinstance(kind, Integer):
        return _Codec(_same, _integer)
    if isinstance(kind, Float):
        return _Codec(_same, _number)
    if isinstance(kind, String):
        return _Codec(_same, _of(str))
    return _Codec(_plain, _same)


def _same(value: Any) -> Any:
    return value


def _plain(value: Any) -> Any:
    """A value of another column type, if JSON holds it exactly."""
    if isinstance(value, str | int | float | bool):
        return value
    raise ValueError(f"cannot archive a {type(value).__name__} value")


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="microseconds")


def _aware_datetime(value: Any) -> datetime:
    parsed = datetime.fromisoformat(_of(str)(value))
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset")
    return parsed


def _hex(value: Any) -> str:
    if not isinstance(value, str) or uuid.UUID(hex=value).hex != value:
        raise ValueError(f"{value!r} is not 32 lowercase hex digits")
    return value


def _integer(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    return value


def _number(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    return value


def _of(kind: type[Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, kind):
            raise ValueError(f"{value!r} is not a {kind.__name__}")
        return value

    return check


__all__ = ["FORMAT", "VERSION", "ArchiveError", "ArchiveWriter", "ImportResult", "PruneResult",
           "RunArchive", "import_archive", "prune", "read_archive"]
