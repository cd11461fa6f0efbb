"""The whole schema as the migrations build it: ``store.models``' tables, with the indexes
declared in a dialect's own terms (partial indexes, PostgreSQL's GIN indexes).

Declaring an index with a dialect's options imports that dialect's SQLAlchemy package, so
these are declared apart from the tables, which every query needs: a process that only reads
and writes rows (``signoff runs`` on SQLite) never loads PostgreSQL's dialect. Importing this
module adds them to ``store.models.metadata``; Alembic's environment and the migrations' tests
compare a database with it.
"""

from __future__ import annotations

from sqlalchemy import Index, text

from store.json_filters import item_at
from store.models import approvals, metadata, seen_requests

DUE_SET = text("next_due_at IS NOT NULL")
"""The rows of the approvals' due-time index: the pending ones."""

APPROVER_KEYS = ("approvers", "escalate_to")
"""The lists of people in an approval's policy who may decide it (``/agent pending``)."""

UNFINISHED = text("work IS NOT NULL")
"""The signed requests whose acknowledged work is not done yet."""


def _add_dialect_indexes() -> None:
    """The approvals' due-time index and the unfinished requests' (partial indexes), and on
    PostgreSQL the approvers of approvals, written through at once: a list of pending entries
    would be read in full by every search."""
    Index(
        "ix_approvals_next_due_at",
        approvals.c.next_due_at,
        postgresql_where=DUE_SET,
        sqlite_where=DUE_SET,
    )
    Index(
        "ix_seen_requests_unfinished",
        seen_requests.c.seen_at,
        postgresql_where=UNFINISHED,
        sqlite_where=UNFINISHED,
    )
    for key in APPROVER_KEYS:
        Index(
            f"ix_approvals_policy_{key}",
            item_at(approvals.c.policy, key),
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ).ddl_if(dialect="postgresql")


_add_dialect_indexes()

__all__ = ["metadata"]
