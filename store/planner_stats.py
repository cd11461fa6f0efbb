"""Whether PostgreSQL plans Signoff's statements on statistics that describe its tables.

PostgreSQL chooses between reading a row through an index and reading the whole table by
the statistics it took of the table (``ANALYZE``; autovacuum takes them as tables change).
A table analyzed when it was nearly empty, or never, looks empty, and a statement that finds
one row by an index is then planned as a read of the whole table: a decision batch, a
delivery step or a claim that should take microseconds reads every row. On a server with
autovacuum off, nothing takes them but an operator. ``stale_statistics`` names Signoff's
tables whose rows have changed more since their statistics were taken than the statistics
describe; SQLite's planner prefers an index without statistics, so it names none there.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, text

from store.errors import translated
from store.models import metadata

LIVE_ROWS = 1_000
"""Live rows below which a table is never called stale: a small table is read cheaply
whatever the plan (and one emptied since its statistics were taken misleads nobody)."""
CHANGED_SHARE = 0.5
"""The share of a table's live rows that must have changed (rows inserted, updated or
deleted) since its last ``ANALYZE`` for it to be called stale; autovacuum's own threshold
is 10 % and 50 rows. A table never analyzed is stale from ``LIVE_ROWS`` rows."""

_COUNTS = text(
    "SELECT relname, n_live_tup, n_mod_since_analyze,"
    " (last_analyze IS NULL AND last_autoanalyze IS NULL) AS never"
    " FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname = ANY(:tables)"
    " ORDER BY relname"
)


@dataclass(frozen=True, slots=True)
class StaleTable:
    """A table whose statistics no longer describe it."""

    name: str
    live_rows: int
    changed_rows: int
    never_analyzed: bool


def stale_statistics(engine: Engine) -> list[StaleTable]:
    """Signoff's tables whose statistics are missing or stale, by name (``StoreUnavailable``
    if the database is down); none on SQLite."""
    if engine.dialect.name != "postgresql":
        return []
    with translated(), engine.connect() as conn:
        rows = conn.execute(_COUNTS, {"tables": sorted(metadata.tables)}).all()
    return [
        StaleTable(name, int(live), int(changed), bool(never))
        for name, live, changed, never in rows
        if live >= LIVE_ROWS and (never or changed >= CHANGED_SHARE * live)
    ]


__all__ = ["CHANGED_SHARE", "LIVE_ROWS", "StaleTable", "stale_statistics"]
