"""Appending to the audit log's chains inside a caller's transaction, and reading them.

Each shard of runs has its own chain and head row (``agent_runtime.audit``). A transaction
locks the head rows of the shards it appends to, in shard order, and holds them until it
commits: appends to one chain are serialised, so it never forks, while decisions on runs of
other shards append at the same time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Row, and_, bindparam, insert, select, text, update

from agent_runtime.audit import AuditDraft, AuditEntry, chain, shard_of
from agent_runtime.audit_keys import AuditKeys
from agent_runtime.exceptions import InvalidConfiguration
from store.models import audit_head, audit_log

ENTRY_FIELDS = tuple(c.name for c in audit_log.c)
HEAD = select(audit_head.c.shard, audit_head.c.seq, audit_head.c.hash)
LOCK_HEAD = HEAD.where(audit_head.c.shard == bindparam("shard"))
LOCK_HEADS = HEAD.where(audit_head.c.shard.in_(bindparam("shards", expanding=True))).order_by(
    audit_head.c.shard
)
ADD_ENTRY = insert(audit_log).values({name: bindparam(f"e_{name}") for name in ENTRY_FIELDS})
MOVE_HEAD = (
    update(audit_head)
    .where(audit_head.c.shard == bindparam("e_shard"))
    .values(seq=bindparam("e_seq"), hash=bindparam("e_hash"))
)
APPEND = MOVE_HEAD.add_cte(ADD_ENTRY.cte("appended"))
"""The statements of an append, built once, so each call only binds its values."""
AT_HEAD = and_(audit_head.c.shard == audit_log.c.shard, audit_head.c.seq == audit_log.c.seq)
"""An entry of the log that is its chain's head."""
SIGNED_HEADS = (
    select(audit_log.c.shard)
    .join(audit_head, AT_HEAD)
    .where(
        audit_head.c.shard.in_(bindparam("shards", expanding=True)), audit_log.c.kid.is_not(None)
    )
)
"""Of the given shards, those whose newest entry is signed."""
UNSIGNED = (
    "the audit log is signed: set SIGNOFF_AUDIT_KEYS here as in the processes that sign it "
    "(an entry without a signature after signed ones fails `signoff audit verify`)"
)
RULINGS_LOCK = text("SELECT pg_advisory_xact_lock(7361616475)")
"""Serialises rulings on PostgreSQL (SQLite serialises every write transaction)."""


class Chains:
    """The audit chains as one transaction sees them: the heads it locked, and its appends."""

    def __init__(self, conn: Connection, keys: AuditKeys | None) -> None:
        self._conn = conn
        self._keys = keys
        self._postgres = conn.dialect.name == "postgresql"
        self._heads: dict[int, tuple[int, str]] = {}

    def lock(self, *run_ids: str) -> None:
        """Lock the heads of ``run_ids``' shards not locked yet, in shard order (so two
        transactions that lock several never deadlock). Without keys, refuse a chain whose
        newest entry is signed (``InvalidConfiguration``): an unsigned entry after it would
        read as tampering."""
        shards = sorted({shard_of(run_id) for run_id in run_ids} - set(self._heads))
        if not shards:
            return
        if len(shards) == 1:
            rows = self._conn.execute(self._for_update(LOCK_HEAD), {"shard": shards[0]}).all()
        else:
            rows = self._conn.execute(self._for_update(LOCK_HEADS), {"shards": shards}).all()
        self._heads |= {row.shard: (row.seq, row.hash) for row in rows}
        require_heads(shards, self._heads)
        if self._keys is None and self._conn.execute(SIGNED_HEADS, {"shards": shards}).first():
            raise InvalidConfiguration(UNSIGNED)  # before anything is written

    def append(self, draft: AuditDraft) -> AuditEntry:
        """Append ``draft`` to its run's chain, locking that chain's head first if needed."""
        self.lock(draft.run_id)
        seq, prev_hash = self._heads[shard_of(draft.run_id)]
        entry = chain(draft, seq + 1, prev_hash, self._keys)
        values = entry_values(entry)
        if self._postgres:
            self._conn.execute(APPEND, values)  # one round trip under the lock
        else:
            self._conn.execute(ADD_ENTRY, values)
            self._conn.execute(MOVE_HEAD, values)
        self._heads[entry.shard] = (entry.seq, entry.hash)
        return entry

    def append_many(self, drafts: Sequence[AuditDraft]) -> list[AuditEntry]:
        """Append ``drafts`` in their order, each to its run's chain: every head they need
        locked in one statement, the entries inserted in one, and each chain's head moved
        once."""
        self.lock(*(draft.run_id for draft in drafts))
        entries = chained(drafts, self._heads, self._keys)
        if not entries:
            return entries
        self._conn.execute(ADD_ENTRY, [entry_values(entry) for entry in entries])
        self._conn.execute(MOVE_HEAD, [entry_values(entry) for entry in last_of_each(entries)])
        return entries

    def serialise_rulings(self) -> None:
        """Wait until no other ruling is between this point and its commit."""
        if self._postgres:
            self._conn.execute(RULINGS_LOCK)

    def _for_update(self, query: Any) -> Any:
        return query.with_for_update() if self._postgres else query


def require_heads(shards: Sequence[int], heads: dict[int, tuple[int, str]]) -> None:
    """``InvalidConfiguration`` unless ``heads`` has every one of ``shards``: the schema does
    not have the shards the code expects."""
    missing = set(shards) - set(heads)
    if missing:
        raise InvalidConfiguration(f"audit shards without a head row: {sorted(missing)}")


def chained(
    drafts: Sequence[AuditDraft], heads: dict[int, tuple[int, str]], keys: AuditKeys | None
) -> list[AuditEntry]:
    """``drafts`` as entries, in their order, each after its shard's head in ``heads`` (which
    must hold every shard they need, and is moved to the last entry of each)."""
    entries = []
    for draft in drafts:
        seq, prev_hash = heads[shard_of(draft.run_id)]
        entry = chain(draft, seq + 1, prev_hash, keys)
        heads[entry.shard] = (entry.seq, entry.hash)
        entries.append(entry)
    return entries


def last_of_each(entries: Sequence[AuditEntry]) -> list[AuditEntry]:
    """The last of ``entries`` in each shard: the heads they leave."""
    return list({entry.shard: entry for entry in entries}.values())


def entry_row(entry: AuditEntry) -> dict[str, Any]:
    """The row of the log that holds ``entry``."""
    return {name: getattr(entry, name) for name in ENTRY_FIELDS}


def entry_values(entry: AuditEntry) -> dict[str, Any]:
    """The bind values of ``ADD_ENTRY`` and ``MOVE_HEAD`` for ``entry``."""
    return {f"e_{name}": value for name, value in entry_row(entry).items()}


def read_log(conn: Connection) -> tuple[list[AuditEntry], dict[int, tuple[int, str]]]:
    """Return every entry, by shard then number, and every head row."""
    rows = conn.execute(select(audit_log).order_by(audit_log.c.shard, audit_log.c.seq)).all()
    heads = {row.shard: (row.seq, row.hash) for row in conn.execute(HEAD)}
    return [entry_of(row) for row in rows], heads


def newest_entries(conn: Connection) -> list[AuditEntry]:
    """Return the newest entry of every chain that has one, by shard, through the heads."""
    newest = select(audit_log).join(audit_head, AT_HEAD).order_by(audit_log.c.shard)
    return [entry_of(row) for row in conn.execute(newest)]


def entry_of(row: Row[Any]) -> AuditEntry:
    """The entry a row of the log holds."""
    return AuditEntry(
        shard=row.shard,
        seq=row.seq,
        at=row.at,
        approval_id=row.approval_id,
        run_id=row.run_id,
        action=row.action,
        actor=row.actor,
        detail=row.detail,
        prev_hash=row.prev_hash,
        hash=row.hash,
        kid=row.kid,
        mac=row.mac,
    )
