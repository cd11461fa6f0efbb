"""The audit log against someone who can write to the database and recompute the chain.

Entries are appended through the real wiring (so they are signed with the keys in the
settings); the attacker rewrites them with SQL UPDATEs through SQLAlchemy, recomputing
every hash and the head with the chain function, but without the key. ``signoff audit
verify`` runs as a real subprocess on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from agent_runtime.audit import GENESIS, AuditDraft, chain
from bot.settings import Settings
from bot.wiring import Services, build_services
from store import SqlStore
from store.models import audit_head, audit_log
from tests.integration import run_cli, signoff_env

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KEY = "k1:0f1e2d3c4b5a69788796a5b4c3d2e1f0"
ACTIONS = ["requested", "unauthorized", "approve", "requested", "reject"]


def env_with(pg_url: str, **extra: str) -> dict[str, str]:
    """The environment of a ``signoff`` process on the test database."""
    return signoff_env(pg_url, extra=extra)


@pytest.fixture
def services(pg_store: SqlStore, pg_url: str) -> Iterator[Services]:
    """Services wired from settings that hold the audit key."""
    built = build_services(Settings.from_env(env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY)),
                           migrate=False)
    yield built
    built.store.engine.dispose()


def write_log(services: Services, count: int = len(ACTIONS)) -> None:
    """Append ``count`` entries, U_DANA approving entry 3, through the approvals store."""
    for seq, action in enumerate(ACTIONS[:count], start=1):
        who = "U_DANA" if action in ("approve", "reject") else "U_REQUESTER"
        services.approvals.store.append_audit(AuditDraft(
            at=T0 + timedelta(minutes=seq), approval_id=f"ap{seq // 4}", run_id="r1",
            action=action, actor={"user_id": who}, detail={"by": who}))


def rewrite(engine: Engine, seq: int, **values: Any) -> None:
    """Change entry ``seq`` in SQL, then recompute every hash from it on and the head."""
    with engine.begin() as conn:
        conn.execute(update(audit_log).where(audit_log.c.seq == seq).values(**values))
        rows = conn.execute(select(audit_log).order_by(audit_log.c.seq)).all()
        prev_hash = GENESIS
        for row in rows:
            if row.seq >= seq:
                draft = AuditDraft(at=row.at, approval_id=row.approval_id, run_id=row.run_id,
                                   action=row.action, actor=row.actor, detail=row.detail)
                entry = chain(draft, row.seq, prev_hash)
                conn.execute(update(audit_log).where(audit_log.c.seq == row.seq).values(
                    prev_hash=entry.prev_hash, hash=entry.hash))
                prev_hash = entry.hash
            else:
                prev_hash = row.hash
        conn.execute(update(audit_head).values(seq=rows[-1].seq, hash=prev_hash))


def verify(env: dict[str, str], *flags: str) -> tuple[int, dict[str, Any]]:
    """Run ``signoff audit verify --json``; return its exit status and report."""
    done = run_cli(env, "audit", "verify", "--json", *flags)
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def test_rewritten_and_rechained_approver_is_caught_with_the_key(
    services: Services, pg_url: str
) -> None:
    """U_DANA rewritten to U_MALLORY with every hash recomputed: verify with the key exits 1."""
    write_log(services)
    env = env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY)
    assert verify(env)[0] == 0

    rewrite(services.store.engine, 3, actor={"user_id": "U_MALLORY"},
            detail={"by": "U_MALLORY"})

    code, report = verify(env)
    assert code == 1
    assert report["ok"] is False
    assert report["problems"] == [
        f"entry {seq}: its MAC does not verify (rewritten, or its MAC copied from another entry)"
        for seq in (3, 4, 5)]
