"""API clients (their keys stored hashed) and the approvals they asked for.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("webhook_secret", sa.String(80), nullable=False),
        _when("created_at"),
        _when("revoked_at", nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_api_keys"),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    )
    op.create_table(
        "api_approvals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("client", sa.String(100), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("approval_id", sa.String(24), nullable=True),
        sa.Column("callback_url", sa.Text(), nullable=True),
        _when("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_api_approvals"),
        sa.UniqueConstraint(
            "client", "idempotency_key", name="uq_api_approvals_client_idempotency_key"
        ),
    )
    op.create_index("ix_api_approvals_approval_id", "api_approvals", ["approval_id"])


def downgrade() -> None:
    op.drop_table("api_approvals")
    op.drop_table("api_keys")
