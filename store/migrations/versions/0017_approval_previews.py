"""What an approved call would do: the preview shown to approvers and its digest.

Both are NULL for approvals asked without a preview (before this revision, or for tools
that declare none); those run as before, unchecked.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("preview", JSON, nullable=True))
        batch.add_column(sa.Column("preview_digest", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("preview_digest")
        batch.drop_column("preview")
