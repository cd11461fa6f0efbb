"""Forks: a run may start from another run's journal prefix.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("forked_from", sa.Uuid(), nullable=True))
        batch.add_column(sa.Column("fork_at", sa.Integer(), nullable=True))
    op.create_index("ix_runs_forked_from", "runs", ["forked_from"])


def downgrade() -> None:
    op.drop_index("ix_runs_forked_from", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("fork_at")
        batch.drop_column("forked_from")
