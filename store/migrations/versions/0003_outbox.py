"""The outbox of notices for Slack.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("data", JSON, nullable=False),
        _when("created_at"),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _when("next_at"),
        sa.Column("claimed_by", sa.String(200), nullable=True),
        _when("claimed_until", nullable=True),
        sa.Column("channel", sa.String(40), nullable=True),
        sa.Column("ts", sa.String(40), nullable=True),
        _when("delivered_at", nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_outbox"),
        sa.UniqueConstraint("key", name="uq_outbox_key"),
    )
    op.create_index("ix_outbox_status_next_at", "outbox", ["status", "next_at"])
    op.create_index("ix_outbox_run_id_status", "outbox", ["run_id", "status"])


def downgrade() -> None:
    op.drop_table("outbox")
