"""Audit entries signed with a key the database does not hold: a key id and a MAC.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("kid", sa.String(32), nullable=True))
        batch.add_column(sa.Column("mac", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_column("mac")
        batch.drop_column("kid")
