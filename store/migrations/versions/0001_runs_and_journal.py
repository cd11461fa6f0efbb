"""Runs, their journal, failed attempts and delivered events.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _run_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["run_id"], ["runs.id"], name=f"fk_{table}_run_id_runs", ondelete="CASCADE"
    )


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("workflow", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("input", JSON, nullable=True),
        sa.Column("output", JSON, nullable=True),
        sa.Column("error", JSON, nullable=True),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        _timestamp("due_at", nullable=True),
        sa.Column("wait_key", sa.Text(), nullable=True),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("fence", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_index("ix_runs_created_at", "runs", ["created_at"])
    op.create_index("ix_runs_due_at", "runs", ["due_at"])
    op.create_index("ix_runs_status_created_at", "runs", ["status", "created_at"])
    op.create_table(
        "steps",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("input_hash", sa.String(16), nullable=False),
        sa.Column("output", JSON, nullable=True),
        sa.Column("error", JSON, nullable=True),
        sa.Column("attempts", sa.SmallInteger(), nullable=False),
        _timestamp("started_at"),
        _timestamp("finished_at"),
        _run_fk("steps"),
        sa.PrimaryKeyConstraint("run_id", "position", name="pk_steps"),
    )
    op.create_table(
        "attempts",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("attempt", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("error", JSON, nullable=False),
        _timestamp("at"),
        _run_fk("attempts"),
        sa.PrimaryKeyConstraint("run_id", "position", "attempt", name="pk_attempts"),
    )
    op.create_table(
        "events",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("data", JSON, nullable=True),
        _timestamp("delivered_at"),
        _run_fk("events"),
        sa.PrimaryKeyConstraint("run_id", "key", name="pk_events"),
    )


def downgrade() -> None:
    op.drop_table("events")
    op.drop_table("attempts")
    op.drop_table("steps")
    op.drop_table("runs")
