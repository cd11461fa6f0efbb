"""The approvals audit log: append-only chains, one per shard of runs, each entry chained to
the one before it in its shard by its hash.

A run's entries all go to one shard (a stable hash of its id), so a decision locks only its
shard's head and decisions on runs of other shards append at the same time. Each shard's
chain starts from its own genesis hash, which binds every entry to its shard: an entry (or
a whole chain) moved to another shard no longer follows the entries before it. Shard 0's
genesis is the one the single chain had, so a log written before there were shards is
shard 0's history and verifies unchanged.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_runtime.audit_keys import AuditKeys
from agent_runtime.serialization import canonical_json

GENESIS = "0" * 64
"""The ``prev_hash`` of shard 0's first entry (the single chain's, before there were shards)."""
AUDIT_SHARDS = 16
"""How many chains the log has. The schema records it (one head row per shard, and a check
on the shard numbers), so changing it takes a migration, never a silent re-sharding."""


def shard_of(run_id: str) -> int:
    """Return the shard whose chain holds ``run_id``'s entries (CRC-32 of the id, stable
    across processes and versions)."""
    return zlib.crc32(run_id.encode()) % AUDIT_SHARDS


def genesis(shard: int) -> str:
    """Return the ``prev_hash`` of the first entry of ``shard``'s chain."""
    if shard == 0:
        return GENESIS
    return hashlib.sha256(f"signoff-audit-shard:{shard}".encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditDraft:
    """An audit entry before the store places it in the chain."""

    at: datetime
    approval_id: str
    run_id: str
    action: str
    actor: dict[str, Any] | None = None
    detail: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """A chained audit entry: number ``seq`` of ``shard``'s chain; ``kid`` and ``mac``
    authenticate its hash when it was signed."""

    seq: int
    at: datetime
    approval_id: str
    run_id: str
    action: str
    actor: dict[str, Any] | None
    detail: dict[str, Any] | None
    prev_hash: str
    hash: str
    kid: str | None = None
    mac: str | None = None
    shard: int = 0


def chain(draft: AuditDraft, seq: int, prev_hash: str, keys: AuditKeys | None = None) -> AuditEntry:
    """Return ``draft`` as entry number ``seq`` of its run's shard, following the entry whose
    hash is ``prev_hash``, signed with the first of ``keys`` when there are keys."""
    fields = dict(
        seq=seq,
        at=draft.at,
        approval_id=draft.approval_id,
        run_id=draft.run_id,
        action=draft.action,
        actor=draft.actor,
        detail=draft.detail,
    )
    digest = entry_hash(prev_hash, fields)
    kid, mac = keys.sign(seq, digest) if keys is not None else (None, None)
    return AuditEntry(
        seq=seq,
        at=draft.at,
        approval_id=draft.approval_id,
        run_id=draft.run_id,
        action=draft.action,
        actor=draft.actor,
        detail=draft.detail,
        prev_hash=prev_hash,
        hash=digest,
        kid=kid,
        mac=mac,
        shard=shard_of(draft.run_id),
    )


def entry_hash(prev_hash: str, fields: dict[str, Any]) -> str:
    """Return the SHA-256 of an entry's fields, chained to the previous entry's hash."""
    content = {**fields, "at": fields["at"].isoformat()}
    return hashlib.sha256((prev_hash + canonical_json(content)).encode()).hexdigest()


def verify(
    entries: Sequence[AuditEntry], head: tuple[int, str] | None, shard: int = 0
) -> list[str]:
    """Return every break in ``shard``'s chain (edited, deleted or reordered entries); empty
    if sound.

    ``head`` is the (seq, hash) of the chain's last entry as the store recorded it on each
    append, so that removing entries from the end is detected too.
    """
    problems: list[str] = []
    prev_hash, expected_seq = genesis(shard), 1
    for entry in entries:
        if entry.seq != expected_seq:
            problems.append(f"entry {expected_seq} is missing (next is {entry.seq})")
        if entry.prev_hash != prev_hash:
            problems.append(f"entry {entry.seq} does not follow the entry before it")
        fields = dict(
            seq=entry.seq,
            at=entry.at,
            approval_id=entry.approval_id,
            run_id=entry.run_id,
            action=entry.action,
            actor=entry.actor,
            detail=entry.detail,
        )
        if entry_hash(entry.prev_hash, fields) != entry.hash:
            problems.append(f"entry {entry.seq} was altered after it was written")
        prev_hash, expected_seq = entry.hash, entry.seq + 1
    if head is not None and head != (expected_seq - 1, prev_hash):
        problems.append(f"the log ends at entry {expected_seq - 1} but its head is entry {head[0]}")
    return problems
