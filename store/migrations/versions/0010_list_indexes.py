"""Indexes that serve every list newest first, a page at a time, with many runs.

Runs and approvals are listed newest first with their id (and position) breaking ties, so
that the next page starts after the last row shown (keyset); each list's index holds that
whole order. A channel's runs and a requester's latest run are found through indexes on
those strings of the run's input; the pending approvals a person may decide, through
indexes (on PostgreSQL) on the approvers and escalation lists of approvals, written
through at once (``fastupdate = off``): a list of pending entries would be read in full by
every search.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

APPROVER_KEYS = ("approvers", "escalate_to")
INPUT_PATHS = {"channel": ("context", "slack", "channel"), "requester": ("requester", "user_id")}


def _input_expression(keys: tuple[str, ...]) -> str:
    if op.get_bind().dialect.name == "postgresql":
        return "(input #> '{" + ",".join(keys) + "}')"
    return "json_extract(input, '$." + ".".join(keys) + "')"


def upgrade() -> None:
    op.drop_index("ix_runs_created_at", table_name="runs")
    op.drop_index("ix_runs_status_created_at", table_name="runs")
    op.drop_index("ix_approvals_requested_at", table_name="approvals")
    op.create_index("ix_runs_created_at_id", "runs", ["created_at", "id"])
    op.create_index("ix_runs_status_created_at_id", "runs", ["status", "created_at", "id"])
    for name, keys in INPUT_PATHS.items():
        op.execute(
            f"CREATE INDEX ix_runs_input_{name} ON runs ({_input_expression(keys)}, created_at, id)"
        )
    op.create_index(
        "ix_approvals_requested_at_position_id", "approvals", ["requested_at", "position", "id"]
    )
    op.create_index(
        "ix_approvals_status_requested_at_position_id",
        "approvals",
        ["status", "requested_at", "position", "id"],
    )
    if op.get_bind().dialect.name == "postgresql":
        for key in APPROVER_KEYS:
            op.execute(
                f"CREATE INDEX ix_approvals_policy_{key} ON approvals "
                f"USING gin ((policy -> '{key}')) WITH (fastupdate = off)"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for key in APPROVER_KEYS:
            op.drop_index(f"ix_approvals_policy_{key}", table_name="approvals")
    op.drop_index("ix_approvals_status_requested_at_position_id", table_name="approvals")
    op.drop_index("ix_approvals_requested_at_position_id", table_name="approvals")
    for name in INPUT_PATHS:
        op.drop_index(f"ix_runs_input_{name}", table_name="runs")
    op.drop_index("ix_runs_status_created_at_id", table_name="runs")
    op.drop_index("ix_runs_created_at_id", table_name="runs")
    op.create_index("ix_approvals_requested_at", "approvals", ["requested_at"])
    op.create_index("ix_runs_status_created_at", "runs", ["status", "created_at"])
    op.create_index("ix_runs_created_at", "runs", ["created_at"])
