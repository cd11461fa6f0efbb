"""Signatures of Slack requests already handled, to refuse replays.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "seen_requests",
        sa.Column("signature", sa.String(80), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("signature", name="pk_seen_requests"),
    )
    op.create_index("ix_seen_requests_seen_at", "seen_requests", ["seen_at"])


def downgrade() -> None:
    op.drop_table("seen_requests")
