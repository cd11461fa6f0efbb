"""Approvals and their hash-chained audit log.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
GENESIS = "0" * 64


def _when(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(24), nullable=False),
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("args", JSON, nullable=False),
        sa.Column("args_hash", sa.String(64), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("policy", JSON, nullable=False),
        sa.Column("requester", JSON, nullable=False),
        _when("requested_at"),
        _when("deadline"),
        sa.Column("reason_asked", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("votes", JSON, nullable=False),
        sa.Column("decided_by", JSON, nullable=True),
        _when("decided_at", nullable=True),
        sa.Column("decided_args", JSON, nullable=True),
        sa.Column("decided_args_hash", sa.String(64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("diff", JSON, nullable=True),
        sa.Column("escalated", sa.Boolean(), nullable=False),
        _when("remind_at", nullable=True),
        sa.Column("consumed_by", sa.Integer(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_approvals_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_approvals"),
    )
    op.create_index("ix_approvals_run_id", "approvals", ["run_id"])
    op.create_index("ix_approvals_status_deadline", "approvals", ["status", "deadline"])
    op.create_index("ix_approvals_requested_at", "approvals", ["requested_at"])
    op.create_table(
        "audit_log",
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        _when("at"),
        sa.Column("approval_id", sa.String(24), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("actor", JSON, nullable=True),
        sa.Column("detail", JSON, nullable=True),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_audit_log"),
    )
    head = op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_head"),
    )
    op.bulk_insert(head, [{"id": 1, "seq": 0, "hash": GENESIS}])


def downgrade() -> None:
    op.drop_table("audit_head")
    op.drop_table("audit_log")
    op.drop_table("approvals")
