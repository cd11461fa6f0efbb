"""A handled Slack request may carry the work it was acknowledged for, until it is done.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


UNFINISHED = sa.text("work IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("seen_requests") as batch:
        batch.add_column(sa.Column("work", JSON, nullable=True))
    # the sweep looks for unfinished work only: a partial index keeps it off the rest
    op.create_index(
        "ix_seen_requests_unfinished",
        "seen_requests",
        ["seen_at"],
        postgresql_where=UNFINISHED,
        sqlite_where=UNFINISHED,
    )


def downgrade() -> None:
    op.drop_index("ix_seen_requests_unfinished", table_name="seen_requests")
    with op.batch_alter_table("seen_requests") as batch:
        batch.drop_column("work")
