"""Journal entries without a foreign key to their run.

Every entry is written by the fenced ``INSERT … SELECT … FROM runs WHERE id = … AND
fence = … AND status = 'running'`` (share-locked on PostgreSQL), which writes nothing
unless the run exists and is held, and holds it until the entry commits; a fork's
inherited entries are copied in the transaction that creates the fork. The foreign key
checked the same row a second time for every step (on PostgreSQL a trigger's query and a
second row lock: about 50 µs per step, as much as the rest of the step's server time
beyond a bare insert). Pruning deletes a run's entries itself, as it does its other rows.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

FOREIGN_KEY = "fk_steps_run_id_runs"


def upgrade() -> None:
    # SQLite copies the table without it; the runs table it named is not read
    with op.batch_alter_table("steps", reflect_kwargs={"resolve_fks": False}) as batch:
        batch.drop_constraint(FOREIGN_KEY, type_="foreignkey")


def downgrade() -> None:
    with op.batch_alter_table("steps") as batch:
        batch.create_foreign_key(FOREIGN_KEY, "runs", ["run_id"], ["id"], ondelete="CASCADE")
