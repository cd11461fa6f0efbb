"""The archive format: what a prune archives, that every column round-trips through a line,
and that a line the importer cannot trust is refused with its number."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Boolean, Column, Integer, String, Table

from store.archive import RUN_TABLES, ArchiveError, ArchiveWriter, RunArchive, read_archive
from store.models import audit_log, metadata, runs
from store.types import HexUuid, JsonDocument, UTCDateTime

RUN = "0123456789abcdef0123456789abcdef"
WHEN = datetime(2001, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)


def _sample(column: Column[Any]) -> Any:
    """A value for ``column`` that a careless encoding would change."""
    kind = column.type
    if column.name == "status":
        return "completed"
    samples: list[tuple[type[Any], Any]] = [
        (JsonDocument, {"z": [1, 2.5, None, "é\n"], "a": {"nested": True}}),
        (HexUuid, RUN),
        (UTCDateTime, WHEN),
        (Boolean, True),
        (Integer, 2**40),
        (String, "text ✓"),
    ]
    return next(value for base, value in samples if isinstance(kind, base))


def _row(table: Table) -> dict[str, Any]:
    row = {column.name: _sample(column) for column in table.columns}
    if "run_id" in row:
        row["run_id"] = RUN
    return row


def _archive() -> RunArchive:
    row = _row(runs) | {"id": RUN}
    return RunArchive(run=row, rows={t.name: [_row(t)] for t in RUN_TABLES})


def _line(doc: dict[str, Any]) -> str:
    return json.dumps(doc)


def test_every_table_that_references_runs_is_archived() -> None:
    """Deleting a run cascades to no table that prune does not archive; only the audit log stays."""
    referencing = {
        table.name
        for table in metadata.tables.values()
        if any(fk.column.table is runs for fk in table.foreign_keys)
    }
    holding_runs = {table.name for table in metadata.tables.values() if "run_id" in table.c}
    archived = {table.name for table in RUN_TABLES}
    assert referencing <= archived
    assert holding_runs == archived | {audit_log.name}


def test_every_column_survives_a_line_unchanged() -> None:
    """Each column of each archived table, whatever was added lately, reads back equal."""
    archive = _archive()
    assert RunArchive.from_json(json.loads(_line(archive.to_json()))) == archive


def test_timestamps_are_iso_8601_with_offset_and_microseconds() -> None:
    """A timestamp is written as ISO-8601 text with its UTC offset and its microseconds."""
    doc = json.loads(_line(_archive().to_json()))
    assert doc["run"]["created_at"] == "2001-02-03T04:05:06.789012+00:00"
    assert (doc["format"], doc["version"]) == ("signoff-archive", 1)


def _broken(change: str) -> dict[str, Any]:
    """A valid document with one thing wrong."""
    doc: dict[str, Any] = json.loads(_line(_archive().to_json()))
    if change == "version 2":
        doc["version"] = 2
    elif change == "version true":
        doc["version"] = True
    elif change == "other format":
        doc["format"] = "something-else"
    elif change == "unknown key":
        doc["comments"] = []
    elif change == "missing key":
        del doc["events"]
    elif change == "unknown column":
        doc["steps"][0]["colour"] = "red"
    elif change == "missing column":
        del doc["steps"][0]["name"]
    elif change == "another run's row":
        doc["attempts"][0]["run_id"] = "f" * 32
    elif change == "unfinished run":
        doc["run"]["status"] = "running"
    elif change == "naive timestamp":
        doc["run"]["updated_at"] = "2001-02-03T04:05:06"
    elif change == "text in an integer":
        doc["run"]["fence"] = "1"
    elif change == "null where required":
        doc["run"]["workflow"] = None
    return doc


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("version 2", "unknown archive format 'signoff-archive' version 2"),
        ("version true", "unknown archive format 'signoff-archive' version True"),
        ("other format", "unknown archive format 'something-else'"),
        ("unknown key", "unknown key 'comments'"),
        ("missing key", "missing key 'events'"),
        ("unknown column", "steps has no column 'colour'"),
        ("missing column", "a row of 'steps' lacks 'name'"),
        ("another run's row", "a row of 'attempts' belongs to another run"),
        ("unfinished run", "is running, not finished"),
        ("naive timestamp", "runs.updated_at: '2001-02-03T04:05:06' has no UTC offset"),
        ("text in an integer", "runs.fence: '1' is not an integer"),
        ("null where required", "runs.workflow must not be null"),
    ],
)
def test_a_line_that_cannot_be_trusted_is_refused_with_its_number(
    change: str, message: str, tmp_path: Path
) -> None:
    """Reading stops at the bad line with an error that names the line and the fault."""
    path = tmp_path / "runs.jsonl"
    good = _line(_archive().to_json())
    path.write_text(f"{good}\n\n{_line(_broken(change))}\n{good}\n", encoding="utf-8")
    with pytest.raises(ArchiveError) as raised:
        list(read_archive(path))
    assert raised.value.line == 3
    assert str(raised.value).startswith(f"line 3 of {path}: ")
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json\n", "not JSON: "),
        (b"\xff\xfe\n", "not UTF-8 text"),
        (b"[1, 2]\n", "not a JSON object"),
    ],
)
def test_a_line_that_is_not_a_document_is_refused(
    content: bytes, message: str, tmp_path: Path
) -> None:
    """Text that is not a JSON object is refused with the line's number."""
    path = tmp_path / "runs.jsonl"
    path.write_bytes(content)
    with pytest.raises(ArchiveError, match=f"^line 1 of .*: {message}"):
        list(read_archive(path))


def _append(path: Path, archive: RunArchive) -> None:
    writer = ArchiveWriter(path)
    try:
        writer.append([archive])
    finally:
        writer.close()


def test_a_line_torn_by_a_crash_is_dropped_before_appending(tmp_path: Path) -> None:
    """The unfinished last line a crash leaves is cut off; the lines before it stay whole."""
    path = tmp_path / "runs.jsonl"
    archive = _archive()
    whole = json.dumps(archive.to_json(), separators=(",", ":"))
    path.write_text(f"{whole}\n{whole[:40]}", encoding="ascii")
    _append(path, archive)
    assert [found for _, found in read_archive(path)] == [archive, archive]
    assert len(path.read_text(encoding="ascii").splitlines()) == 2


def test_an_unfinished_last_line_of_another_kind_is_kept(tmp_path: Path) -> None:
    """A last line that is not the start of an archive line is kept, on a line of its own."""
    path = tmp_path / "runs.jsonl"
    path.write_text("a note without a newline", encoding="ascii")
    _append(path, _archive())
    assert path.read_text(encoding="ascii").splitlines()[0] == "a note without a newline"
    with pytest.raises(ArchiveError, match=r"^line 1 of "):
        list(read_archive(path))


def test_an_archive_written_before_the_api_tables_still_reads() -> None:
    """A document without the ``api_approvals`` key (written before the approvals API)
    reads back with no rows of that table."""
    doc = json.loads(_line(_archive().to_json()))
    del doc["api_approvals"]
    assert RunArchive.from_json(doc).rows["api_approvals"] == []
