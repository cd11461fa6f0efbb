"""The approvals' next due time (deadline or reminder) and a partial index over the pending ones.

The sweep then reads the few due approvals from the index instead of scanning every pending one.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

INDEX = "ix_approvals_next_due_at"
PENDING_ONLY = sa.text("next_due_at IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("next_due_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE approvals SET next_due_at = CASE WHEN remind_at IS NOT NULL "
        "AND remind_at < deadline THEN remind_at ELSE deadline END WHERE status = 'pending'"
    )
    op.create_index(
        INDEX,
        "approvals",
        ["next_due_at"],
        postgresql_where=PENDING_ONLY,
        sqlite_where=PENDING_ONLY,
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name="approvals")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("next_due_at")
