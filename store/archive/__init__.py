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

from store.archive.file import ArchiveWriter, read_archive
from store.archive.format import FORMAT, RUN_TABLES, VERSION, ArchiveError, RunArchive
from store.archive.pruning import PruneResult, prune
from store.archive.restore import ImportResult, import_archive

__all__ = [
    "FORMAT",
    "RUN_TABLES",
    "VERSION",
    "ArchiveError",
    "ArchiveWriter",
    "ImportResult",
    "PruneResult",
    "RunArchive",
    "import_archive",
    "prune",
    "read_archive",
]
