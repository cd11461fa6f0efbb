"""Drop the index on approvals' status and deadline, which no statement reads any more.

The approvals sweep reads the partial index on each pending approval's next due time
(0014); nothing else searches approvals by deadline. The index only cost every approval
asked and every decision one more index entry.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_approvals_status_deadline", table_name="approvals")


def downgrade() -> None:
    op.create_index("ix_approvals_status_deadline", "approvals", ["status", "deadline"])
