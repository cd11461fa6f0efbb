"""The audit log's chains per shard against someone with write access to PostgreSQL.

Entries of four runs in four shards are appended through the real wiring (signed with the
key), anchored with ``signoff audit anchor``, then tampered with in SQL; ``signoff audit
verify`` runs with the key, without and with the anchor file. Both commands run through
``bot.cli.main.main`` in this process: their exit status and output as processes are proven
in ``test_audit_rewrite``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, delete, insert, select, text, update

from agent_runtime.audit import AuditDraft, chain, genesis, shard_of
from bot.app.wiring import Services
from store import SqlStore
from store.models import audit_head, audit_log
from tests.integration.in_process import InProcessCli
from tests.integration.test_audit_rewrite import KEY, anchor, env_with, verify, wired

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RUNS = ("run", "r1", "x", "b")
"""Runs in shards 0, 1, 3 and 9, three entries each."""

Attack = Callable[[Connection], None]


@pytest.fixture
def services(pg_store: SqlStore, pg_url: str) -> Iterator[Services]:
    """Services on the emptied test database that sign with ``KEY``, with the log written."""
    assert [shard_of(r) for r in RUNS] == [0, 1, 3, 9]
    with wired(pg_url, KEY) as built:
        for n in range(3):
            for run_id in RUNS:
                built.approvals.store.append_audit(
                    AuditDraft(
                        at=T0 + timedelta(seconds=n),
                        approval_id=f"ap-{run_id}",
                        run_id=run_id,
                        action="approve" if n else "requested",
                        actor={"user_id": "U_DANA"},
                    )
                )
        yield built


def _hash(conn: Connection, shard: int, seq: int) -> str:
    row = conn.execute(
        select(audit_log.c.hash).where(audit_log.c.shard == shard, audit_log.c.seq == seq)
    ).one()
    return str(row.hash)


def _set_head(conn: Connection, shard: int, seq: int, hash_: str) -> None:
    conn.execute(update(audit_head).where(audit_head.c.shard == shard).values(seq=seq, hash=hash_))


def edit(conn: Connection) -> None:
    """A requested entry rewritten as an approval."""
    conn.execute(text("UPDATE audit_log SET action = 'approve' WHERE shard = 3 AND seq = 1"))


def delete_one(conn: Connection) -> None:
    """The middle entry of shard 3 deleted."""
    conn.execute(delete(audit_log).where(audit_log.c.shard == 3, audit_log.c.seq == 2))


def insert_one(conn: Connection) -> None:
    """A forged approval chained after shard 3's head, without the key, and the head moved."""
    draft = AuditDraft(at=T0, approval_id="ap-x", run_id="x", action="approve", actor=None)
    forged = chain(draft, 4, _hash(conn, 3, 3))
    conn.execute(insert(audit_log).values(**_columns(forged)))
    _set_head(conn, 3, 4, forged.hash)


def reorder(conn: Connection) -> None:
    """Entries 1 and 2 of shard 3 swapped."""
    for seq, to in ((1, 99), (2, 1), (99, 2)):
        conn.execute(
            update(audit_log).where(audit_log.c.shard == 3, audit_log.c.seq == seq).values(seq=to)
        )


def move(conn: Connection) -> None:
    """Shard 1's newest entry moved to the end of shard 3, both heads adjusted."""
    moved = _hash(conn, 1, 3)
    conn.execute(
        update(audit_log).where(audit_log.c.shard == 1, audit_log.c.seq == 3).values(shard=3, seq=4)
    )
    _set_head(conn, 1, 2, _hash(conn, 1, 2))
    _set_head(conn, 3, 4, moved)


def drop_head(conn: Connection) -> None:
    """Shard 9's head row deleted."""
    conn.execute(delete(audit_head).where(audit_head.c.shard == 9))


def drop_newest(conn: Connection) -> None:
    """Shard 9's newest entry deleted and its head moved back onto the entry before."""
    conn.execute(delete(audit_log).where(audit_log.c.shard == 9, audit_log.c.seq == 3))
    _set_head(conn, 9, 2, _hash(conn, 9, 2))


def truncate(conn: Connection) -> None:
    """Every entry of shard 3 deleted and its head reset to the empty chain's."""
    conn.execute(delete(audit_log).where(audit_log.c.shard == 3))
    _set_head(conn, 3, 0, genesis(3))


MISSING = "is missing from the log (deleted, or the log truncated)"


@pytest.mark.parametrize(
    ("attack", "without_anchors", "with_anchors"),
    [
        (edit, "shard 3: entry 1 was altered after it was written", None),
        (delete_one, "shard 3: entry 2 is missing (next is 3)", None),
        (insert_one, "shard 3: entry 4: unsigned, though signing began at entry 1", None),
        (reorder, "shard 3: entry 1 does not follow the entry before it", None),
        (move, "shard 3: entry 4 does not follow the entry before it", None),
        (drop_head, "shard 9: its head row is missing (the log was truncated)", None),
        (drop_newest, None, f"shard 9: anchor line 1: entry 3 {MISSING}"),
        (truncate, None, f"shard 3: anchor line 1: entry 3 {MISSING}"),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_verify_catches_each_attack_on_a_shards_chain(
    services: Services,
    pg_url: str,
    tmp_path: Path,
    cli_here: InProcessCli,
    attack: Attack,
    without_anchors: str | None,
    with_anchors: str | None,
) -> None:
    """Each attack on one chain makes verify exit 1 naming the shard: from the chains and
    MACs alone, or (a chain cut short with its head) from the anchor taken before."""
    anchors = tmp_path / "anchors.jsonl"
    env = env_with(pg_url, SIGNOFF_AUDIT_KEYS=KEY)
    written = anchor(cli_here, env, anchors)
    assert [(h["shard"], h["seq"]) for h in written["heads"]] == [(0, 3), (1, 3), (3, 3), (9, 3)]
    code, report = verify(cli_here, env, "--anchors", str(anchors))
    assert (code, report["entries"], len(report["chains"])) == (0, 12, 16)

    with services.store.engine.begin() as conn:
        attack(conn)

    code, report = verify(cli_here, env)
    if without_anchors is None:
        assert (code, report["problems"]) == (0, []), "a chain cut with its head looks sound"
    else:
        assert code == 1
        assert without_anchors in report["problems"]
    code, report = verify(cli_here, env, "--anchors", str(anchors))
    assert code == 1
    assert (with_anchors or without_anchors) in report["problems"]


def _columns(entry: object) -> dict[str, object]:
    return {c.name: getattr(entry, c.name) for c in audit_log.c}
