"""Grants: approvals of similar calls given ahead of time from an approval's card.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "grants",
        sa.Column("id", sa.String(16), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("scope", sa.String(8), nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("source_approval", sa.String(24), nullable=False),
        sa.Column("predicate", JSON, nullable=False),
        sa.Column("granted_by", JSON, nullable=False),
        _when("granted_at"),
        _when("expires_at"),
        sa.Column("revoked_by", JSON, nullable=True),
        _when("revoked_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_grants"),
    )
    op.create_index("ix_grants_tool_expires_at", "grants", ["tool", "expires_at"])
    op.create_index("ix_grants_granted_at", "grants", ["granted_at"])


def downgrade() -> None:
    op.drop_table("grants")
