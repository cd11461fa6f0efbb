"""Many Slack workspaces: their installations, OAuth states, and each notice's workspace.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "slack_installations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("enterprise_id", sa.String(40), nullable=False),
        sa.Column("team_id", sa.String(40), nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("installed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_slack_installations"),
        sa.UniqueConstraint(
            "enterprise_id", "team_id", name="uq_slack_installations_enterprise_id_team_id"
        ),
    )
    op.create_table(
        "slack_oauth_states",
        sa.Column("state", sa.String(80), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("state", name="pk_slack_oauth_states"),
    )
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(
            sa.Column("team_id", sa.String(40), nullable=False, server_default=sa.text("''"))
        )
        batch.add_column(
            sa.Column("enterprise_id", sa.String(40), nullable=False, server_default=sa.text("''"))
        )


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("enterprise_id")
        batch.drop_column("team_id")
    op.drop_table("slack_oauth_states")
    op.drop_table("slack_installations")
