"""The archive's line format: one finished run per JSON document, checked as it is decoded."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Table

from agent_runtime.exceptions import SignoffError
from agent_runtime.ids import RunId
from agent_runtime.records import RunStatus
from store.archive.codecs import decode_row, encode_row
from store.models import (
    api_approvals,
    approvals,
    attempts,
    events,
    grants,
    outbox,
    runs,
    steps,
)

FORMAT = "signoff-archive"
VERSION = 1
FINISHED = (RunStatus.COMPLETED.value, RunStatus.FAILED.value, RunStatus.CANCELLED.value)
RUN_TABLES: tuple[Table, ...] = (
    steps,
    attempts,
    events,
    approvals,
    outbox,
    api_approvals,
    grants,
)
"""The tables holding a run's rows, by their ``run_id`` column (the outbox and the grants given
from the run's approvals have no foreign key)."""
LATER_TABLES = frozenset({api_approvals.name, grants.name})
"""Tables added since version 1: an archive written before them has no key for them."""


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
        doc: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "run": encode_row(runs, self.run),
        }
        for table in RUN_TABLES:
            doc[table.name] = [encode_row(table, row) for row in self.rows[table.name]]
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> RunArchive:
        """Validate and decode an archive document; ValueError says what is wrong."""
        _check_header(doc)
        run = decode_row(runs, doc["run"])
        if run.get("status") not in FINISHED:
            raise ValueError(f"run {run.get('id')} is {run.get('status')}, not finished")
        rows = {
            table.name: _decode_rows(table, doc.get(table.name, []), run["id"])
            for table in RUN_TABLES
        }
        return cls(run=run, rows=rows)


def no_rows() -> Counter[str]:
    """A count of zero rows for the runs and each of ``RUN_TABLES``."""
    return Counter(dict.fromkeys(["runs", *(t.name for t in RUN_TABLES)], 0))


def parse_line(path: Path, number: int, raw: bytes) -> RunArchive:
    try:
        return RunArchive.from_json(json.loads(raw.decode("utf-8")))
    except UnicodeDecodeError:
        raise ArchiveError(path, number, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ArchiveError(path, number, f"not JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError as exc:
        raise ArchiveError(path, number, str(exc)) from None


def _check_header(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    kind, version = doc.get("format"), doc.get("version")
    if kind != FORMAT or type(version) is not int or version != VERSION:
        raise ValueError(
            f"unknown archive format {kind!r} version {version!r}"
            f" (this Signoff reads {FORMAT!r} version {VERSION})"
        )
    expected = {"format", "version", "run", *(t.name for t in RUN_TABLES)}
    if extra := sorted(set(doc) - expected):
        raise ValueError(f"unknown key {extra[0]!r}")
    if missing := sorted(expected - LATER_TABLES - set(doc)):
        raise ValueError(f"missing key {missing[0]!r}")


def _decode_rows(table: Table, value: Any, run_id: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise ValueError(f"{table.name!r} must be a list")
    decoded = [decode_row(table, row) for row in value]
    if any(row.get("run_id") != run_id for row in decoded):
        raise ValueError(f"a row of {table.name!r} belongs to another run than {run_id}")
    if len({frozenset(row) for row in decoded}) > 1:
        raise ValueError(f"the rows of {table.name!r} have different columns")
    return decoded
