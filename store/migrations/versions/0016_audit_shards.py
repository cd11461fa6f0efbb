"""The audit log in 16 chains, one per shard of runs, each with its own head row.

The single chain becomes shard 0's history unchanged (its genesis hash is shard 0's), so a
log written before keeps verifying; shards 1-15 start empty. A decision then locks only its
run's shard's head. The 16 head rows and the checks on the shard numbers record the count.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

SHARDS = 16
SHARD_RANGE = f"shard >= 0 AND shard < {SHARDS}"


def _genesis(shard: int) -> str:
    """Shard ``shard``'s genesis hash, as ``agent_runtime.audit.genesis`` computes it."""
    return hashlib.sha256(f"signoff-audit-shard:{shard}".encode()).hexdigest()


def upgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("shard", sa.Integer(), nullable=False, server_default="0"))
        batch.drop_constraint("pk_audit_log", type_="primary")
        batch.create_primary_key("pk_audit_log", ["shard", "seq"])
        batch.create_check_constraint(op.f("ck_audit_log_shard"), SHARD_RANGE)
    with op.batch_alter_table("audit_log") as batch:
        batch.alter_column("shard", server_default=None)
    with op.batch_alter_table("audit_head") as batch:
        batch.alter_column("id", new_column_name="shard", existing_type=sa.Integer())
    op.execute("UPDATE audit_head SET shard = 0 WHERE shard = 1")
    with op.batch_alter_table("audit_head") as batch:
        batch.create_check_constraint(op.f("ck_audit_head_shard"), SHARD_RANGE)
    head = sa.table(
        "audit_head", sa.column("shard", sa.Integer), sa.column("seq"), sa.column("hash")
    )
    op.bulk_insert(head, [{"shard": s, "seq": 0, "hash": _genesis(s)} for s in range(1, SHARDS)])


def downgrade() -> None:
    used = op.get_bind().execute(sa.text("SELECT count(*) FROM audit_log WHERE shard > 0"))
    if used.scalar_one():
        raise RuntimeError("audit entries in shards 1-15 cannot go back into a single chain")
    op.execute("DELETE FROM audit_head WHERE shard > 0")
    op.execute("UPDATE audit_head SET shard = 1 WHERE shard = 0")
    with op.batch_alter_table("audit_head") as batch:
        batch.drop_constraint(op.f("ck_audit_head_shard"), type_="check")
        batch.alter_column("shard", new_column_name="id", existing_type=sa.Integer())
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_constraint(op.f("ck_audit_log_shard"), type_="check")
        batch.drop_constraint("pk_audit_log", type_="primary")
        batch.create_primary_key("pk_audit_log", ["seq"])
        batch.drop_column("shard")
