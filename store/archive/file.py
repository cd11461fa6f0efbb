"""The archive file: appending runs durably, mending a torn last line, reading runs back."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from store.archive.format import FORMAT, ArchiveError, RunArchive, parse_line

TAIL_CHUNK = 65536
LINE_START = f'{{"format":"{FORMAT}","version":'.encode("ascii")
"""How every line this module writes begins."""


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


def read_archive(path: Path) -> Iterator[tuple[int, RunArchive]]:
    """Yield each run of an archive with its line number; blank lines are skipped."""
    with _os_errors(path, "cannot read"):
        handle = path.open("rb")
    with handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                yield number, parse_line(path, number, raw)


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
