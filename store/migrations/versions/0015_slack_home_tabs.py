"""The Home tabs people have opened, so that changes re-publish only theirs.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slack_home_tabs",
        sa.Column("workspace", sa.String(40), nullable=False),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("refreshes", sa.Integer(), nullable=False, server_default=sa.text("0")),
        sa.Column("refresh_due_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("workspace", "user_id", name="pk_slack_home_tabs"),
    )


def downgrade() -> None:
    op.drop_table("slack_home_tabs")
